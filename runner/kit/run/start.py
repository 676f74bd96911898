"""`kit run` of one campaign: its request checked, then its plan printed (--dry-run), its
sbatch scripts written (--emit), or its trials run in its results folder, held."""

import contextlib
import signal
import sys
from pathlib import Path

from kit.core import jsonout, paths
from kit.core.errors import KitError, RunFailed
from kit.core.log import logger
from kit.results import runlock, store
from kit.run import campaign, orphans, plan, request, sbatch
from kit.run.checks import Campaign, RunRequest

log = logger(__name__)


def run(q: RunRequest, checked: Campaign) -> None:
    """The campaign the request describes, checked (request.check); the results folder is
    printed last (on a failed run too: it holds the records either way)."""
    c = request.prepare(q, checked, plan_only=q.dry_run)
    out = q.out or store.new_folder(c.recipe.name)
    if q.emit:  # the scripts' folder, not --out, is what the emission writes
        paths.make_dir(q.emit, "--emit", dry_run=q.dry_run)
        sbatch.check_folder(q.emit)
    if q.dry_run:  # what the run would refuse before its first trial, in its order, now
        if not q.emit:
            runlock.check_out(out)
            store.check_campaign(out, c.spec, q.resume)
        campaign.preflight(c.recipe, c.runtimes, c.design, c.opts, out, variant=c.variant)
        if q.json:
            sys.stdout.write(jsonout.dumps(plan.as_data(c.design, c.opts)))
        else:
            print(plan.describe(c.design, c.opts))
        return
    if q.emit:
        scripts = sbatch.emit(c.recipe, c.variant, c.runtimes, c.design.trials(), q.emit, c.opts)
        log.info(f"wrote {len(scripts)} sbatch scripts to {q.emit}; submit each with sbatch")
        for path in scripts:
            print(path)
        return
    signal.signal(signal.SIGTERM, _interrupt)
    made = not out.exists()
    with runlock.held(out):
        campaign_id, done = store.open_campaign(out, c.spec, q.resume)
        if q.resume:  # its killed run's trials may still run: none beside the first trial
            orphans.end(campaign_id)
        try:
            campaign.execute(
                c.recipe, c.variant, c.runtimes, c.design, out, c.opts, campaign_id, done
            )
        except RunFailed:
            print(out)
            raise
        except KitError:  # refused before its first trial (preflight, preparing)
            if not q.resume:
                _unstarted(out, made)
            raise
    print(out)


def _unstarted(out: Path, made: bool) -> None:
    """A campaign refused before it recorded anything leaves nothing behind (its
    campaign.json, an empty trials file, its lock: a later run there was told to
    --resume a campaign that never ran); a trials file holding anything is kept whole."""
    trials = out / store.FILE
    if not trials.is_file() or trials.stat().st_size:
        return
    for name in (store.FILE, store.SPEC_FILE, runlock.LOCK_FILE):
        with contextlib.suppress(FileNotFoundError):
            (out / name).unlink()
    for folder in (out / store.LOGS, *([out] if made else [])):
        with contextlib.suppress(OSError):  # not empty, or not there: kept
            folder.rmdir()


def _interrupt(_sig: int, _frame: object) -> None:
    """SIGTERM ends a campaign as Ctrl-C does: its trials stopped, its records kept."""
    raise KeyboardInterrupt
