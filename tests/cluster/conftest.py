"""Fixtures for cluster tests: separate hosts on this machine (see ``netns.py``).

``make_test_network(n)`` makes a network of ``n`` host namespaces (more than one per test if
needed); ``test_network`` is one of three hosts (a head and two nodes, say). Both close what
they made at teardown, also when the test failed, and skip the test, saying why, where
namespaces cannot be made here (not root, no iproute2, no permission).
"""

from collections.abc import Callable, Iterator

import pytest

from .netns import TestNetwork, make_network, netns_skip_reason


@pytest.fixture
def make_test_network() -> Iterator[Callable[[int], TestNetwork]]:
    reason = netns_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    made: list[TestNetwork] = []

    def make(n_hosts: int) -> TestNetwork:
        net = make_network(n_hosts)
        made.append(net)
        return net

    yield make
    errors = []
    for net in made:
        try:
            net.close()
        except RuntimeError as exc:  # close everything, then say what was left
            errors.append(str(exc))
    if errors:
        pytest.fail("; ".join(errors))


@pytest.fixture
def test_network(make_test_network: Callable[[int], TestNetwork]) -> TestNetwork:
    return make_test_network(3)
