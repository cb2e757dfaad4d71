"""The inference engines a voice's graphs run on, and what the machine offers them."""
