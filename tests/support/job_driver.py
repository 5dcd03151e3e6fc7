"""A notebook-like driver for the Ray Jobs test: join a dashboard cluster, submit two trainings, follow, stop.

python -m tests.support.job_driver ADDRESS TOKEN_FILE RUN_DIR  ->  one JSON line with what it saw.
"""

from __future__ import annotations

import io
import json
import sys
import time
from contextlib import redirect_stdout


def main(address: str, token_file: str, run_dir: str) -> dict:
    from rlightning.notebook import Lab
    from rlightning.utils.config import load_preset

    lab = Lab.connect(address, token_file=token_file, timeout_s=30)
    out: dict = {}
    try:
        short = load_preset("cartpole_ppo")
        short.train.iterations = 2
        short.log.run_dir = run_dir
        long = load_preset("cartpole_ppo")
        long.train.iterations = 10_000
        long.train.target_return = None
        long.log.run_dir = run_dir
        job = lab.submit(short, name="short")
        stopped = lab.submit(long, name="long")
        seen = []
        while True:
            status = job.status()
            seen.append(status)
            if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                break
            time.sleep(0.5)
        followed = io.StringIO()
        with redirect_stdout(followed):
            out["final"] = job.wait(timeout=300)
        out["seen"] = list(dict.fromkeys(seen))  # in order, once each
        out["followed"] = followed.getvalue()
        out["metrics"] = job.metrics()
        out["df_iterations"] = [int(i) for i in job.metrics_df()["iteration"]]
        out["logs"] = job.logs()
        out["repr"] = repr(job)
        again = lab.job(job.job_id)
        out["again_status"] = again.status()
        deadline = time.time() + 240
        while not stopped.metrics() and time.time() < deadline:  # mid-run: at least one iteration done
            time.sleep(0.5)
        out["stopped_metrics_before"] = len(stopped.metrics())
        out["stopped_status_before"] = stopped.status()
        out["stopped_final"] = stopped.stop(timeout=120)
        out["stopped_metrics_after"] = len(stopped.metrics())
        out["job_ids"] = [job.job_id, stopped.job_id]
    finally:
        lab.shutdown()
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
