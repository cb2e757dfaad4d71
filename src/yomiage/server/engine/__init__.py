"""The engine behind the routes: the :class:`~.service.SpeechService` the routes call, run in
the server's process (:mod:`.service`) or in a supervised worker process (:mod:`.worker`:
its supervisor owns the child and the calls on it, the calls that retry and the streams use
it, and a restarted worker replays the voice changes)."""
