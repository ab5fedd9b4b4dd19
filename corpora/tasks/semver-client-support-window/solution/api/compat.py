"""Which mobile app versions the API still serves."""

from semantic_version import Version


def client_supported(api_version, client_version):
    """True when a client of `client_version` may call an API of `api_version`."""
    api, client = Version(api_version), Version(client_version)
    return client.major == api.major and client.minor >= api.minor - 2
