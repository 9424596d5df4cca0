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


def render(bind=None, **more):
    settings = {"spawner": "local", **({"bind": bind} if bind else {}), **more}
    return hub.render_config(Layout(Path("/state")), settings, ["student01"],
                             Path("/state/node/node_modules/.bin/configurable-http-proxy"))


def test_the_hub_binds_loopback_unless_told_otherwise():
    values = config_values(render())
    assert values["JupyterHub.bind_url"] == f"http://127.0.0.1:{hub.PORT}"
    # The hub's own API and the proxy's API stay on loopback whatever --bind says.
    assert values["JupyterHub.hub_bind_url"] == f"http://127.0.0.1:{hub.HUB_API_PORT}"
    assert values["ConfigurableHTTPProxy.api_url"] == f"http://127.0.0.1:{hub.PROXY_API_PORT}"


def test_bind_moves_only_the_public_address_and_serves_tls_only():
    values = config_values(render("10.0.0.5", ssl_cert="/state/secrets/tls/hub.crt", ssl_key="/state/secrets/tls/hub.key"))
    assert values["JupyterHub.bind_url"] == f"https://10.0.0.5:{hub.PORT}"
    assert values["JupyterHub.ssl_cert"] == "/state/secrets/tls/hub.crt"
    assert values["JupyterHub.ssl_key"] == "/state/secrets/tls/hub.key"
    assert values["JupyterHub.hub_bind_url"] == f"http://127.0.0.1:{hub.HUB_API_PORT}"
    assert values["ConfigurableHTTPProxy.api_url"] == f"http://127.0.0.1:{hub.PROXY_API_PORT}"
    assert hub.url({"bind": "10.0.0.5"}) == f"https://10.0.0.5:{hub.PORT}"
    assert "JupyterHub.ssl_cert" not in config_values(render())


def test_local_servers_run_with_limits_per_user():
    limits = {"*": {"memory_bytes": 1 << 30, "processes": 100, "cpu_weight": 100, "home_bytes": 1 << 30}}
    values = config_values(render(limits=limits))
    assert values["JupyterHub.spawner_class"] == "handson_lib.classroom.limits.LimitedSpawner"
    assert values["LimitedSpawner.limits"] == limits


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


def test_each_users_limits_keep_what_was_asked_before():
    from handson_lib.classroom import command, limits
    first = command.user_limits_of({}, memory_gib=3)
    assert first.memory_bytes == 3 << 30 and first.home_bytes == limits.UserLimits().home_bytes
    kept = command.user_limits_of({"limits": {"*": first.as_dict()}}, home_gib=1)
    assert (kept.memory_bytes, kept.home_bytes) == (3 << 30, 1 << 30)
    import pytest
    from handson_lib.classroom.layout import ClassroomError
    with pytest.raises(ClassroomError, match="more than 0"):
        command.user_limits_of({}, memory_gib=0)


def test_a_self_signed_certificate_covers_the_bound_address_and_a_given_pair_is_checked(tmp_path):
    import ssl
    import subprocess
    import pytest
    from handson_lib.classroom import tls
    from handson_lib.classroom.layout import ClassroomError
    lay = Layout(tmp_path / "state")
    cert, key = tls.ensure_self_signed(lay, "10.0.0.5")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    text = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-text"], capture_output=True, text=True).stdout
    assert "IP Address:10.0.0.5" in text and "IP Address:127.0.0.1" in text
    assert tls.ensure_self_signed(lay, "10.0.0.5") == (cert, key) and cert.stat().st_mtime_ns == cert.stat().st_mtime_ns
    assert len(tls.fingerprint(cert)) == 95
    ssl.PEM_cert_to_DER_cert(cert.read_text())
    assert tls.check_given(cert, key) == (str(cert), str(key))
    other = Layout(tmp_path / "other")
    _, other_key = tls.ensure_self_signed(other, "0.0.0.0")
    with pytest.raises(ClassroomError, match="is not the key of the certificate"):
        tls.check_given(cert, other_key)
    with pytest.raises(ClassroomError, match="go together"):
        tls.check_given(cert, None)
