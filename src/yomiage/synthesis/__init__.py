"""Text to audio chunks: the pipeline that drives a voice sentence by sentence, the
pauses between sentences and the optional pitch change. ``pipeline`` is where a
request's work is ordered."""
