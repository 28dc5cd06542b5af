"""One of the processes of test_allowances' two-process test: a Gatekeeper on a shared Postgres archive that tries
to take a member's answers as fast as it can, once told to go.

`python tests/support/allowance_taker.py DATABASE_URL ATTEMPTS MOMENT`: prints `ready` once its archive is open,
waits for a line on stdin (so both processes take at the same time), then prints how many answers it was granted.
Every take is made at MOMENT (ISO 8601), so no answer comes back during the run: the grants are the burst, shared
or not.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime
from pathlib import Path

from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # Parley's modules, as when run from its folder

from admission.gatekeeper import Gatekeeper
from archive.backends import open_archive
from config import Settings
from usage.budget import UsageLedger

GUILD, ALICE = 11, 33


async def take_answers(url: str, attempts: int, moment: datetime) -> int:
    settings = Settings(
        discord_token=SecretStr("unused"), database_url=url, member_answers_per_hour=30, member_answer_burst=5
    )
    archive = await open_archive(url)
    try:
        keeper = Gatekeeper(settings, UsageLedger(lambda: moment), clock=lambda: moment)
        keeper.count_in(archive)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        taken = await asyncio.gather(*(keeper.take(GUILD, ALICE) for _ in range(attempts)))
        return sum(admission.admitted for admission in taken)
    finally:
        await archive.close()


if __name__ == "__main__":
    url, attempts, moment = sys.argv[1], int(sys.argv[2]), datetime.fromisoformat(sys.argv[3])
    print(asyncio.run(take_answers(url, attempts, moment)), flush=True)
