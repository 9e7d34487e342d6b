"""The worker wing: the processes that run a learner's code, apart from the grader.

    client.py   IsolatedStudent, the grader's side: a piece is a proxy whose use is a request to a
                worker; values cross by wire.py; LearnerCodeError and the learner's own exceptions
                rebuilt; run(entry, ...) for an entry point of the course in a fresh worker
    server.py   the worker parent (confined, imported torch and the course once, forks a worker
                per test) and the worker that serves the requests
    wire.py     the format values cross in (tensors with their strides and storage, in-place changes)
    tiers.py    the isolation tiers (sandbox, container, process) and their limits
    confine.py  what the worker parent does to itself before it imports anything (uid, capabilities,
                limits, seccomp.py's filter)
    process.py  handles on these processes, as subprocess.Popen sees its child

It knows nothing of pytest, the notebooks or the capstone: the graded tests' runners (grading/)
use a client; the capstone's leaderboard names its entry points to it (worker/server.py).
"""
