"""Generate service config files (TOML) from the service catalogue."""

import toml


def service_config(service):
    """The config document of one catalogue entry, as a dict."""
    return {
        "config_format": "svc/2",
        "service": {"name": service["name"], "owner": service["owner"]},
        "limits": {"cpu": service.get("cpu", 1), "memory_mb": service.get("memory_mb", 512)},
    }


def render(service):
    """The TOML text written to `<name>.toml`."""
    return toml.dumps(service_config(service))
