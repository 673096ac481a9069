"""Inside the grading sandbox: run one notebook with nbclient and report each cell as it finishes.

    python -m servelab.grading.runner run      # notebook JSON on stdin, one JSON line per cell on stdout
    python -m servelab.grading.runner kernel -f CONNECTION_FILE

sandbox.py starts `run` inside bubblewrap; this module never sees a key, the
gradebook or another submission. It prints, one line each:

    {"event": "ready"}                                  the kernel started
    {"event": "cell", "index": i, "outputs": [...], "execution_count": n, "error": name or null,
     "answer": JSON text or "!reason" (a test cell that handed its answer over) or absent}
    {"event": "done", "status": "ok" | "kernel died" | ..., "detail": "..."}

A line is written as soon as its cell finishes, so the grader keeps everything
up to a kernel death, a timeout or a killed sandbox. The kernel writes answers
to a pipe this runner reads (capture.py); an answer counts only when it arrives
while its own test cell runs, so a line forged by an answer cell is dropped, and only
when exactly one value for that test arrives then: a second, different value (from a
thread or a process the submission left running) makes the test's answer
"more than one answer", worth 0. Outputs are capped here, before they reach the grader
(nbgrader's autograde and generate_feedback, formgrader's server): each output costs its whole JSON
(data, mime keys, metadata, traceback), at least OUTPUT_MIN_COST, and a cell keeps at most
MAX_CELL_OUTPUT_CHARS and MAX_CELL_OUTPUTS outputs, the run MAX_RUN_OUTPUT_CHARS and MAX_RUN_OUTPUTS.
Past a cap the cell's outputs end with one "[output cut: ...]" line (the grader flags it) and the
rest is dropped; the cells still run, so every test's answer still counts.

`kernel` is the IPython kernel the notebook runs in: it takes the answer pipe
(capture.py), lowers its own resource limits, and dies with the runner.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path

MAX_CELL_OUTPUT_CHARS = 100_000  # characters of output JSON kept per cell; the rest is replaced by one line saying so
MAX_CELL_OUTPUTS = 500  # outputs kept per cell (a run of one stream's messages is one output)
MAX_RUN_OUTPUTS = 2_000  # outputs kept in the whole notebook
MAX_RUN_OUTPUT_CHARS = 4_000_000  # characters of output JSON kept in the whole notebook
OUTPUT_MIN_COST = 100  # characters one output costs at least: an empty bundle is not free to hold or draw
KERNEL_NAME = "servelab-sandbox"
ENV_LIMITS = "SERVELAB_KERNEL_LIMITS"  # JSON {"RLIMIT_AS": bytes, "RLIMIT_CPU": seconds, ...} for the kernel


def _emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _drop_to(uid: int) -> None:
    """When the sandbox starts as root without a user namespace, become `uid` before anything runs."""
    if os.getuid() == 0 and uid:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def die_with_parent() -> None:
    """Linux SIGKILLs this process when its parent dies (PR_SET_PDEATHSIG): the one way servelab ties a
    grading process to its parent, run in a child before exec (the pipeline's nbgrader, the parallel
    graders) and by the sandbox's kernel on itself. Elsewhere it does nothing.

    Linux delivers it when the thread that forked the child exits, and it reaches one process, not its
    children: the engine's worker, forked from a lab's worker thread and leading vLLM's processes, watches
    its parent instead (servelab.engine._die_with_parent)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _not_dumpable() -> None:
    """The kernel (same uid) may not open this runner's /proc entries or trace it, so it cannot forge its report."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0)  # PR_SET_DUMPABLE 0
    except (OSError, AttributeError):
        pass


def _output_size(out) -> int:
    """What one output costs whoever holds or draws it: its whole JSON, mime keys and metadata included."""
    try:
        size = len(json.dumps(out, default=str))
    except (TypeError, ValueError, RecursionError):  # unserializable or too deep: it costs the whole cell
        size = MAX_CELL_OUTPUT_CHARS + 1
    return max(OUTPUT_MIN_COST, size)


def _output_cap(chars: int, outputs: int, run_chars: int, run_outputs: int) -> str | None:
    """Which cap a cell's outputs passed (its own and the run's totals so far), or None."""
    if chars > MAX_CELL_OUTPUT_CHARS:
        return f"this cell printed more than {MAX_CELL_OUTPUT_CHARS:,} characters"
    if outputs > MAX_CELL_OUTPUTS:
        return f"this cell made more than {MAX_CELL_OUTPUTS:,} outputs"
    if run_chars > MAX_RUN_OUTPUT_CHARS:
        return f"the notebook's outputs passed {MAX_RUN_OUTPUT_CHARS:,} characters"
    if run_outputs > MAX_RUN_OUTPUTS:
        return f"the notebook made more than {MAX_RUN_OUTPUTS:,} outputs"
    return None


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if meta.get("grade") and not meta.get("solution") else None


class _AnswerPipe:
    """The pipe the kernel's capture() writes to, read as it fills so a large answer never blocks the kernel."""

    MAX_BYTES = 4_000_000  # read per cell; a cell that writes more hands over nothing usable

    def __init__(self):
        import threading

        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.buffer = bytearray()
        self.overflowed = False
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            if len(self.buffer) < self.MAX_BYTES:
                self.buffer += chunk
            else:
                self.overflowed = True

    def _pump(self) -> None:
        import select

        while True:
            select.select([self.read_fd], [], [], 0.2)
            with self.lock:
                self._drain()

    def take(self, grade_id: str | None) -> str | None:
        """Everything written since the last cell ended; the one answer for `grade_id`, if any (or "!why not")."""
        with self.lock:
            self._drain()
            data, self.buffer = bytes(self.buffer), bytearray()
            overflowed, self.overflowed = self.overflowed, False
        if overflowed and grade_id is not None:  # what was dropped may have been the test's own answer
            return (
                f"!more than {self.MAX_BYTES:,} bytes were written to the answer pipe while this test ran; none counts"
            )
        answers = set()
        for line in data.split(b"\n"):
            gid, sep, text = line.partition(b"\t")
            if sep and grade_id is not None and gid.decode("utf-8", "replace") == grade_id:
                answers.add(text.decode("utf-8", "replace"))
        if len(answers) > 1:
            # A test hands one answer over; a second, different one came from other code in the
            # kernel (a thread or a forked process the submission started), so neither counts.
            return (
                f"!more than one answer arrived for this test while it ran ({len(answers)} different ones, "
                "so code other than the test wrote to the answer pipe); none counts"
            )
        return answers.pop() if answers else None


def run(timeout: int) -> int:
    """Run the notebook on stdin cell by cell, printing each cell's line as it finishes and one done line. One
    piece: the output caps, the answer pipe and the kernel share one run's lifetime and its counters, so each
    failure is reported with what came before it."""
    # a 2.5-second import nbformat never needs (see nbgrader_cli.py)
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # typeshed: modules only; None is valid
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    nb = nbformat.reads(sys.stdin.read(), as_version=4)
    runtime = Path(os.environ.get("TMPDIR", "/tmp"))
    spec_dir = runtime / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "servelab.grading.runner", "kernel", "-f", "{connection_file}"],
                "display_name": "servelab grading sandbox",
                "language": "python",
            }
        )
    )
    os.environ["JUPYTER_PATH"] = str(runtime / "jupyter")
    answers = _AnswerPipe()
    os.environ["SERVELAB_ANSWER_FD"] = str(answers.write_fd)

    class Client(NotebookClient):
        """nbclient with output caps per cell and per run, so a flood never reaches the grader whole."""

        sizes: dict = {}  # cell index -> characters of output JSON
        counts: dict = {}  # cell index -> outputs
        cut: set = set()  # cells whose outputs ended with the cut line
        run = {"chars": 0, "outputs": 0}

        def output(self, outs, msg, display_id, cell_index):
            if cell_index in self.cut:
                return None
            out = super().output(outs, msg, display_id, cell_index)
            if out is None:
                return out
            size = _output_size(out)
            previous = outs[-2] if len(outs) > 1 else None
            merged = (  # a stream's next message joins its output in the saved notebook
                out.get("output_type") == "stream"
                and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == out.get("name")
            )
            self.sizes[cell_index] = self.sizes.get(cell_index, 0) + size
            self.counts[cell_index] = self.counts.get(cell_index, 0) + (0 if merged else 1)
            self.run["chars"] += size
            self.run["outputs"] += 0 if merged else 1
            why = _output_cap(self.sizes[cell_index], self.counts[cell_index], self.run["chars"], self.run["outputs"])
            if why:
                self.cut.add(cell_index)
                outs[:] = outs[:-1] + [nbformat.v4.new_output("stream", name="stderr", text=f"[output cut: {why}]\n")]
            return out

    def cell_done(cell, cell_index, execute_reply):
        content = (execute_reply or {}).get("content", {})
        record = {
            "event": "cell",
            "index": cell_index,
            "outputs": cell.get("outputs", []),
            "execution_count": cell.get("execution_count"),
            "error": content.get("ename") if content.get("status") == "error" else None,
        }
        answer = answers.take(_grade_id(cell))
        if answer is not None:
            record["answer"] = answer
        _emit(record)

    client = Client(
        nb,
        timeout=timeout,
        interrupt_on_timeout=True,
        allow_errors=True,
        error_on_timeout={
            "ename": "CellTimeoutError",
            "evalue": f"the cell ran longer than {timeout} s and was interrupted",
            "traceback": [],
        },
        kernel_name=KERNEL_NAME,
        on_cell_executed=cell_done,
        record_timing=False,
        resources={"metadata": {"path": os.getcwd()}},
    )
    status, detail = "ok", ""
    try:
        with client.setup_kernel(pass_fds=(answers.write_fd,), stdout=sys.stderr, stderr=sys.stderr):
            os.close(answers.write_fd)
            _emit({"event": "ready"})
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
    except DeadKernelError as exc:
        status, detail = "kernel died", str(exc)
    except Exception as exc:  # noqa: BLE001 - whatever stops the run is reported, the grader keeps what came before
        status, detail = "stopped", f"{type(exc).__name__}: {exc}"
    _emit({"event": "done", "status": status, "detail": detail[:500]})
    return 0


# The kernel's message packer, bound before any cell runs: a submission that replaces
# json.dumps or json.loads changes its own answers' text at most, not the kernel's protocol.
_dumps, _loads = json.dumps, json.loads


def pack(obj) -> bytes:
    """jupyter_client's json_packer, with json's functions bound at start."""
    from jupyter_client.jsonutil import json_clean, json_default

    try:
        text = _dumps(obj, default=json_default, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = _dumps(json_clean(obj), default=json_default, ensure_ascii=False, allow_nan=False)
    return text.encode("utf8", errors="surrogateescape")


def unpack(data):
    if isinstance(data, bytes):
        data = data.decode("utf8", "replace")
    return _loads(data)


def kernel() -> None:
    """The sandbox's IPython kernel: answer pipe bound, limits lowered, dies with the runner."""
    from servelab.grading import capture

    capture.install_from_environment()
    for name, value in json.loads(os.environ.pop(ENV_LIMITS, "{}")).items():
        limit = getattr(resource, name)
        resource.setrlimit(limit, (value, value))
    die_with_parent()
    import builtins

    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(
        sys.argv[2:]
        + ["--Session.packer=servelab.grading.runner.pack", "--Session.unpacker=servelab.grading.runner.unpack"]
    )
    # Builtins come back after every cell: a submission that replaces min or round (which the
    # kernel's own event loop calls) breaks at most the cell that did it, not the tests after it.
    original = dict(builtins.__dict__)

    def restore_builtins(*_):
        for name, value in original.items():
            if builtins.__dict__.get(name) is not value:
                builtins.__dict__[name] = value

    if app.shell is None:  # initialize() above made it
        raise RuntimeError("the kernel app has no shell after initialize()")
    app.shell.events.register("post_run_cell", restore_builtins)
    app.start()


def main(argv: list[str]) -> int:
    if argv[:1] == ["kernel"]:
        kernel()
        return 0
    if argv[:1] == ["run"]:
        _drop_to(int(os.environ.get("SERVELAB_SANDBOX_UID", "0")))
        _not_dumpable()
        return run(int(os.environ.get("SERVELAB_CELL_TIMEOUT", "30")))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
