"""VOICEVOX's and AivisSpeech's engine API on yomiage's server: the routes (:mod:`.routes`,
:mod:`.streaming_routes`, :mod:`.dictionary_routes`, :mod:`.aivm_routes`), what they share
(:mod:`.synthesis`, :mod:`.work`, :mod:`.http`) and the install form (:mod:`.upload_form`).
What the API's fields mean, free of HTTP, is :mod:`yomiage.voicevox`."""
