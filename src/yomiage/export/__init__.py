"""``yomiage convert``: SBV2 voice folders to ONNX voice bundles (needs ``yomiage[torch]``)."""
