"""The engine behind the routes: the :class:`~.service.SpeechService` the routes call, run in
the server's process (:mod:`.service`) or in a supervised worker process (:mod:`.worker`,
with its child, its calls and streams, its liveness deadlines and the voice changes a
restarted worker replays)."""
