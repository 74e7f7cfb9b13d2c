"""Ray Core's spellings under `import actorrt as ray`: each works, or says what to write."""

import pytest

import actorrt as ray


@ray.actor
class Worker:
    def square(self, x: int) -> int:
        return x * x

    def count(self, n: int):  # type: ignore[no-untyped-def]
        yield from range(n)


def test_a_ray_core_script_runs_with_the_actorrt_spellings() -> None:
    ray.init(num_cpus=2)
    try:
        w = ray.get(Worker.options(num_cpus=1).spawn())
        # ref.method.remote(x) is ref.method(x): it sends at once and returns the handle.
        refs = [w.square.remote(i) for i in range(4)]
        assert ray.get(refs) == [0, 1, 4, 9]
        assert ray.get(tuple(refs)) == [0, 1, 4, 9]
        ready, rest = ray.wait(refs, num_returns=4, timeout=30)
        assert ready == refs and rest == []
        big = ray.put(list(range(1000)))
        assert ray.get(w.square.remote(3)) == 9 and ray.get(big)[-1] == 999
        pool = ray.util.ActorPool([w])
        assert list(pool.map(lambda a, v: a.square.remote(v), [5, 6])) == [25, 36]
    finally:
        ray.shutdown()


def test_ray_call_options_and_get_of_a_stream_say_what_to_write() -> None:
    ray.init(num_cpus=1)
    try:
        w = ray.get(Worker.spawn())
        with pytest.raises(TypeError, match=r"unknown option\(s\) num_returns for "
                           r"Worker\(.*\)\.square\(\); allowed: timeout; for Ray's "
                           r"num_returns, return a tuple"):
            w.square.options(num_returns=2)
        with pytest.raises(TypeError, match=r"option\(s\) name, num_cpus .*allowed: "
                           r"timeout, batch_size$"):
            w.count.options(num_cpus=1, name="x")
        stream = w.count.remote(3)  # Ray's spelling of a generator call streams too
        with pytest.raises(TypeError, match=r"got Stream.*read them with `for`"):
            ray.get(stream)
        assert list(stream) == [0, 1, 2]
    finally:
        ray.shutdown()


def test_actor_class_remote_says_to_spawn() -> None:
    with pytest.raises(AttributeError, match=r"Worker.remote\(...\) is Ray's spelling.*"
                       r"await Worker.spawn\(...\).*actorrt.get\(Worker.spawn"):
        Worker.remote()
    with pytest.raises(AttributeError, match=r"Worker.remote\(...\) is Ray's spelling"):
        Worker.options(num_cpus=1).remote()
    assert not hasattr(Worker, "remote")
    with pytest.raises(AttributeError, match="actor class Worker has no attribute 'nothing'"):
        Worker.nothing  # noqa: B018


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("remote", r"@actorrt.actor .* @actorrt.task"),
        ("kill", r"ref.kill\(\)"),
        ("cancel", r"handle.cancel\(\)"),
        ("timeline", "no timeline"),
        ("get_runtime_context", r"actorrt.get_context\(\)"),
    ],
)
def test_missing_ray_names_say_what_to_write(name: str, says: str) -> None:
    with pytest.raises(AttributeError, match=says) as caught:
        getattr(ray, name)
    assert "docs/porting.md" in str(caught.value)


def test_ray_util_names() -> None:
    assert ray.util.placement_group is ray.placement_group
    with pytest.raises(AttributeError, match=r"await pg.remove\(\)"):
        ray.util.remove_placement_group  # noqa: B018
    with pytest.raises(AttributeError, match="ray.util.nothing_like_it"):
        ray.util.nothing_like_it  # noqa: B018
    with pytest.raises(ModuleNotFoundError, match=r"placement=pg.bundle\(i\)"):
        import actorrt.util.scheduling_strategies  # noqa: F401
