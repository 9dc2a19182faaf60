"""Loading the apiserver client, and the errors its calls raise.

The kubernetes client supplies configuration and authentication (kubeconfig, in-cluster service
account); agents/kube.py makes the calls on it.
"""

from __future__ import annotations

import os

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from podledger.errors import UserError


class ApiserverUnreachable(UserError):
    """The apiserver did not answer, or answered with a server error: worth waiting for."""


class KubeError(Exception):
    """An apiserver call failed; `status` is the HTTP status (0 when it was never reached)."""

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        super().__init__(f"{status} {reason}: {body[:300]}")
        self.status = status
        self.reason = reason
        self.body = body

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


def load_api_client(kubeconfig: str = "") -> k8s.ApiClient:
    """An ApiClient from `kubeconfig`, else $KUBECONFIG, else the in-cluster service account."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "")
    configuration = k8s.Configuration()
    try:
        if path:
            if not os.path.exists(path):
                raise UserError(f"kubeconfig {path} does not exist: set KUBECONFIG to a valid file")
            k8s_config.load_kube_config(config_file=path, client_configuration=configuration)
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)
    except ConfigException as exc:
        where = f"kubeconfig {path}" if path else "the in-cluster config"
        raise UserError(f"cannot load {where}: {exc}; set KUBECONFIG to a valid kubeconfig") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UserError(f"kubeconfig {path} is malformed ({exc.__class__.__name__}: {exc})") from None
    except Exception as exc:  # the YAML parser's own errors
        if exc.__class__.__module__.startswith("yaml"):
            raise UserError(f"kubeconfig {path} is not valid YAML: {exc}") from None
        raise
    # TCP keepalive on every connection, with client-go's timings (30 s idle): a peer that vanished
    # breaks an idle watch instead of leaving it open forever.
    configuration.keep_alive = True
    return k8s.ApiClient(configuration)
