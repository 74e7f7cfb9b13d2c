"""A small tour of actorrt's inline actors: `python examples/demo.py`.

A bank of account actors takes concurrent transfers from a teller; one account crashes
on a bad message and is restarted by its supervisor; everything shuts down cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import time

import actorrt


@actorrt.actor(max_restarts=1)
class Account:
    """One account's balance; messages to it are processed one at a time, in order."""

    def __init__(self, owner: str, balance: int) -> None:
        self.owner = owner
        self.balance = balance

    def deposit(self, amount: int) -> int:
        if amount < 0:
            raise ValueError(f"negative deposit {amount} for {self.owner}")
        self.balance += amount
        return self.balance

    def withdraw(self, amount: int) -> int:
        if amount > self.balance:
            raise ValueError(f"{self.owner} has {self.balance}, cannot withdraw {amount}")
        self.balance -= amount
        return self.balance

    def get_balance(self) -> int:
        return self.balance


@actorrt.actor
class Teller:
    """Moves money between accounts; its children are the accounts it opened."""

    def __init__(self) -> None:
        self.accounts: dict[str, actorrt.ActorRef[Account]] = {}

    async def open(self, owner: str, balance: int) -> actorrt.ActorRef[Account]:
        self.accounts[owner] = await Account.options(name=owner).spawn(owner, balance)
        return self.accounts[owner]

    async def transfer(self, src: str, dst: str, amount: int) -> bool:
        try:
            await self.accounts[src].withdraw(amount)
        except ValueError:
            return False
        await self.accounts[dst].deposit(amount)
        return True

    async def total(self) -> int:
        balances = await asyncio.gather(*(a.get_balance() for a in self.accounts.values()))
        return sum(balances)


async def main() -> None:
    teller = await Teller.spawn()
    owners = ["ada", "grace", "linus", "barbara"]
    for owner in owners:
        await teller.open(owner, 1_000)
    print(f"opened {len(owners)} accounts, total {await teller.total()}")

    start = time.perf_counter()
    transfers = [
        teller.transfer(owners[i % 4], owners[(i * 7 + 1) % 4], (i * 37) % 300)
        for i in range(5_000)
    ]
    results = await asyncio.gather(*transfers)
    elapsed = time.perf_counter() - start
    print(
        f"{len(results)} concurrent transfers in {elapsed * 1000:.0f} ms: "
        f"{sum(results)} done, {len(results) - sum(results)} refused; "
        f"total still {await teller.total()}"
    )

    ada = await actorrt.get_actor("ada")
    ada.deposit.tell(-5)  # a failing tell crashes the actor; its supervisor restarts it
    try:
        await ada.get_balance()
    except actorrt.ActorDiedError as err:
        print(f"queued behind the crash: {err.reason} ({type(err.cause).__name__})")
    print(f"ada after restart (fresh state): {await ada.get_balance()}")

    accounts = [await actorrt.get_actor(owner) for owner in owners]
    died = await teller.stop()
    reasons = {(await account.wait_stopped()).reason for account in accounts}
    print(f"teller {died.reason}; its accounts ended with it ({', '.join(reasons)})")


if __name__ == "__main__":
    logging.basicConfig(level=logging.CRITICAL)
    actorrt.run(main)
