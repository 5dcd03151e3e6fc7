import pytest

from rlightning.utils.registry import BUFFERS, ENGINE, ENVS, POLICIES, Registry


def test_register_and_get():
    reg = Registry("widget")

    @reg.register("alpha")
    class Alpha:
        pass

    @reg.register()
    def beta():
        return 1

    assert reg.get("alpha") is Alpha and reg.get("beta") is beta
    assert "alpha" in reg and reg.names() == ["alpha", "beta"] and len(reg) == 2


def test_duplicate_is_error_unless_override():
    reg = Registry("widget")
    reg.register("a")(int)
    reg.register("a")(int)  # the same object again is harmless
    with pytest.raises(KeyError, match="widget 'a' is already registered"):
        reg.register("a")(float)
    reg.register("a", override=True)(float)
    assert reg.get("a") is float


def test_unknown_lists_registered_and_closest():
    reg = Registry("policy")
    reg.register("ppo")(int)
    reg.register("sac")(float)
    with pytest.raises(
        KeyError, match=r"unknown policy 'ppp'\. Did you mean 'ppo'\? Registered policy names: ppo, sac"
    ):
        reg.get("ppp")


def test_global_registries_exist():
    assert {r.name for r in (BUFFERS, ENVS, POLICIES, ENGINE)} == {"buffer", "env", "policy", "engine"}
