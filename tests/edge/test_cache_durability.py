"""An acknowledged store survives kill -9 of the writing process: a real subprocess, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pysqlite3 as sqlite3
import sqlite_vec

from edge.cache.store import CacheStore

REPO = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from pathlib import Path
    from edge.cache.store import CacheStore, NewEntry

    store = CacheStore(Path(sys.argv[1]))
    rng = np.random.default_rng(0)
    i = 0
    while True:
        i += 1
        v = rng.standard_normal(384).astype(np.float32)
        v /= np.linalg.norm(v)
        e = NewEntry(tenant="t", exact_key=f"k{i}", scope="00" * 32, model="auto",
                     prompt_text=f"question {i}", request={}, answer="x" * 2000 + str(i),
                     finish_reason="stop", prompt_tokens=1, completion_tokens=1, tier="edge", embedding=v)
        ids = store.put([e], now=float(i), max_entries=10**9)["ids"]
        print(f"ACK {ids[0]} k{i}", flush=True)  # only after the commit returned
    """
)


def test_acknowledged_rows_survive_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "cache.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    acked: dict[int, str] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            _, rowid, key = line.split()
            acked[int(rowid)] = key
            if len(acked) >= 40:
                break
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: the writer is inside its next transaction
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    assert len(acked) == 40

    conn = sqlite3.connect(str(db))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = dict(conn.execute("SELECT id, exact_key FROM entries").fetchall())
    for rowid, key in acked.items():
        assert rows.get(rowid) == key
    vec_ids = {r[0] for r in conn.execute("SELECT rowid FROM cache_vec")}
    assert set(acked) <= vec_ids
    assert set(rows) == vec_ids  # no half-written entry: both tables commit together
    conn.close()

    # and the file reopens for business, its vectors searchable
    store = CacheStore(db)
    first = np.frombuffer(
        store.read.execute("SELECT embedding FROM entries WHERE id = ?", (min(acked),)).fetchone()[0], dtype=np.float32
    )
    found = store.search("t", "00" * 32, first, nprobe=8, probe_k=8, min_created=0.0)
    assert found[0][0].id == min(acked) and abs(found[0][2] - 1.0) < 1e-5
    store.close()
