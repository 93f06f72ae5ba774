"""Running the check over a tree: one file at a time, in parallel, cached on disk.

The unit of work is a file: its kernels are found (``discover``) and checked (``check_kernel``)
in one worker process, so that one file's engine imports, stand-ins and compiler state never
reach another's. Which jit functions are helpers of kernels in other files is read from the
sources first (``helpers_called_across``), so a worker needs no other file loaded.

A file's report is kept in the cache (``cache``) under the file's source, the sources of the
project files it imports, the Triton version, the suite's own source and the options; a rerun
on an unchanged tree reads it back.
"""

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from triton_overflow.lint import cache, discover

PROGRESS_EVERY_S = 10.0


def lint_files(paths, options, jobs=1, progress=None, use_cache=False):
    """The ``Report`` over every kernel under ``paths``; ``options`` (a dict) are
    ``lint_file``'s keywords; ``jobs`` worker processes; ``progress(done, total, report)`` is
    told after each file."""
    from triton_overflow.lint import Report
    files, problems = discover.files_under(paths)
    report = Report(problems=problems, label="int32 twins" if options.get("twins") else "kernels")
    if options.get("facts") is not None:
        _check_limit_names(files, options["facts"])
    _import_roots_on_path(files)
    helpers = discover.helpers_called_across(files)
    keys = {file: cache.key(file, options) if use_cache else None for file in files}
    pieces = {}
    todo = []
    for file in files:
        stored = cache.load(keys[file]) if use_cache else None
        if stored is not None:
            pieces[file] = stored
        else:
            todo.append(file)
    done = len(pieces)
    tasks = [(str(file), sorted(helpers.get(file, ())), options) for file in todo]
    for file, piece in _run(tasks, jobs):
        pieces[file] = piece
        if use_cache:
            cache.store(keys[file], piece)
        done += 1
        if progress is not None:
            progress(done, len(files), piece)
    for file in files:  # in path order, whatever order the workers finished in
        report.merge(pieces[file])
    return report


def _import_roots_on_path(files):
    """The folder each file's top package sits in, importable (after what is there already):
    a ``src/`` layout's package imports itself by name (``from liger_kernel.ops import ...``)
    whether or not it is installed."""
    from pathlib import Path
    for file in files:
        folder = Path(file).parent
        while (folder / "__init__.py").exists() and folder.parent != folder:
            folder = folder.parent
        if str(folder) not in sys.path:
            sys.path.append(str(folder))


def _run(tasks, jobs):
    """(file, report) of each task, as each finishes."""
    from pathlib import Path
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield Path(task[0]), lint_file(*task)
        return
    import multiprocessing
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["triton_overflow.lint"])
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context,
                             initializer=_start_worker,
                             initargs=(list(sys.path), os.getpid())) as pool:
        futures = {pool.submit(lint_file, *task): Path(task[0]) for task in tasks}
        for future in as_completed(futures):
            file = futures[future]
            try:
                yield file, future.result()
            except Exception as error:  # noqa: BLE001 - a worker that died is one line
                yield file, _failed(file, error)


def _start_worker(path, run_pid):
    from triton_overflow.interp import execution_mode
    _stop_with_run(run_pid)
    sys.path[:] = path
    execution_mode.configure(execution_mode.COMPILE)


def _stop_with_run(run_pid):
    """A worker whose run was killed stops too, mid-compile: a daemon thread looks every
    second whether the run's process is still there."""
    import threading

    def watch():
        while True:
            time.sleep(1.0)
            try:
                os.kill(run_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass  # there, under another user: not ours to judge

    threading.Thread(target=watch, name="stop-with-run", daemon=True).start()


def _failed(file, error):
    from triton_overflow.lint import Report, describe_error
    return Report(problems=[discover.Problem(str(file), f"its check failed: "
                                                        f"{describe_error(error)}")])


def lint_file(file, helpers=(), options=None):
    """The ``Report`` of one file: its kernels (not the ``helpers`` that kernels of other files
    call) checked with ``options`` (``twins``, ``facts``, ``execute``, ``only``,
    ``verify_fixes``). Nothing it raises escapes: a file that cannot be checked is a problem
    line."""
    from triton_overflow.lint import Report, check_file_kernels
    options = dict(options or {})
    started = time.monotonic()
    try:
        report = check_file_kernels(file, set(helpers), **options)
    except Exception as error:  # noqa: BLE001 - one line, and the run goes on
        from triton_overflow.lint import describe_error
        report = Report(problems=[discover.Problem(str(file), f"it could not be loaded: "
                                                              f"{describe_error(error)}")])
    report.seconds[str(file)] = time.monotonic() - started
    return report


def _check_limit_names(files, facts):
    """Every name an envelope gives is an argument of some kernel under the paths (or a grid
    axis)."""
    valid = discover.declared_parameters(files)
    unknown = sorted(set(facts.names) - valid - {"rows", "grid0", "grid1", "grid2"})
    if unknown and valid:
        raise ValueError(f"--limits names no argument of the kernels checked: "
                         f"{', '.join(unknown)}; their arguments are: "
                         f"{', '.join(sorted(valid))} (and rows, grid0, grid1, grid2)")


class Progress:
    """A line on stderr while a long run goes on: rewritten in place on a terminal, every
    ``PROGRESS_EVERY_S`` otherwise; nothing for a run that ends within that time."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.last = self.started
        self.kernels = 0
        self.terminal = self.stream.isatty() and os.environ.get("TERM") != "dumb"

    def __call__(self, done, total, piece):
        self.kernels += len(piece.results)
        now = time.monotonic()
        if now - self.last < (0.5 if self.terminal else PROGRESS_EVERY_S) and done < total:
            return
        if now - self.started < PROGRESS_EVERY_S and done == total and not self.terminal:
            return
        self.last = now
        line = (f"lint: {done}/{total} files, {self.kernels} kernels checked, "
                f"{now - self.started:.0f} s")
        if self.terminal:
            self.stream.write("\r" + line + ("\n" if done == total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
