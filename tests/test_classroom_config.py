"""The hub's configuration as `handson classroom up` renders it (no hub, no root, no accounts)."""

import os
from pathlib import Path

from handson_lib.classroom import hub
from handson_lib.classroom.layout import Layout


def config_values(text):
    """Run the rendered jupyterhub_config.py against a stand-in of traitlets' config object; the
    values it sets, by 'Class.trait'. Secret files it reads are given as empty."""
    values = {}

    class Section:
        def __init__(self, name):
            object.__setattr__(self, "_name", name)

        def __setattr__(self, trait, value):
            values[f"{self._name}.{trait}"] = value

    class Config:
        def __getattr__(self, name):
            return Section(name)

    class NoFile:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return ""

    exec(compile(text, "jupyterhub_config.py", "exec"), {"get_config": Config, "open": NoFile})
    return values


def render(bind=None):
    settings = {"spawner": "local", **({"bind": bind} if bind else {})}
    return hub.render_config(Layout(Path("/state")), settings, ["student01"],
                             Path("/state/node/node_modules/.bin/configurable-http-proxy"))


def test_the_hub_binds_loopback_unless_told_otherwise():
    values = config_values(render())
    assert values["JupyterHub.bind_url"] == f"http://127.0.0.1:{hub.PORT}"
    # The hub's own API and the proxy's API stay on loopback whatever --bind says.
    assert values["JupyterHub.hub_bind_url"] == f"http://127.0.0.1:{hub.HUB_API_PORT}"
    assert values["ConfigurableHTTPProxy.api_url"] == f"http://127.0.0.1:{hub.PROXY_API_PORT}"


def test_bind_moves_only_the_public_address():
    values = config_values(render("10.0.0.5"))
    assert values["JupyterHub.bind_url"] == f"http://10.0.0.5:{hub.PORT}"
    assert values["JupyterHub.hub_bind_url"] == f"http://127.0.0.1:{hub.HUB_API_PORT}"
    assert values["ConfigurableHTTPProxy.api_url"] == f"http://127.0.0.1:{hub.PROXY_API_PORT}"
    assert hub.url({"bind": "10.0.0.5"}) == f"http://10.0.0.5:{hub.PORT}"


def test_a_folder_closed_to_an_account_is_named_on_the_way_to_a_path():
    """The report after an instructor's failed command: which folder on the way is closed to it."""
    import tempfile
    from handson_lib.classroom import accounts
    with tempfile.TemporaryDirectory() as tmp:   # pytest's own tmp_path sits in folders of 0700
        os.chmod(tmp, 0o755)
        _closed_and_open(accounts, Path(tmp))


def _closed_and_open(accounts, tmp_path):
    closed = tmp_path / "closed"
    (closed / "inside").mkdir(parents=True)
    closed.chmod(0o700)
    open_too = tmp_path / "open"
    (open_too / "inside").mkdir(parents=True)
    open_too.chmod(0o755)
    blocked = accounts.blocked_on_the_way("nobody", closed / "inside")
    assert [b.split(" (")[0] for b in blocked] == [str(closed)], blocked
    assert "0o700" in blocked[0]
    assert accounts.blocked_on_the_way("nobody", open_too / "inside") == []
