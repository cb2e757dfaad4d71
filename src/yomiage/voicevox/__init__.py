"""VOICEVOX's engine API for yomiage's voices: the AudioQuery model (:mod:`.model`),
style ids (:mod:`.ids`), queries from readings and back (:mod:`.query`), a query as
options and WAV (:mod:`.synthesis`) and presets
(:mod:`.presets`); the HTTP routes are in :mod:`yomiage.server.voicevox.routes`."""
