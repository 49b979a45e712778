"""A pytest plugin for valkey-bloom's integration tests (scripts/ci/valkey_bloom_tests.py loads
it with `-p valkey_bloom_loopback`): their framework starts every valkey-server without a `bind`
line (so on all interfaces), points replicas at 0.0.0.0 and probes free ports by binding
0.0.0.0. Our tests bind loopback only, so once the tests are collected this plugin makes the
framework's servers `bind 127.0.0.1`, its replicas follow 127.0.0.1, and its port probe bind
127.0.0.1. The test files themselves are run unchanged.
"""

import fcntl
import os
import socket
import sys

LOOPBACK = "127.0.0.1"


def _loopback_args(original):
    def get_valkey_args(self):
        args = original(self)
        args["bind"] = LOOPBACK
        return args
    get_valkey_args.bloomgate_loopback = True
    return get_valkey_args


def _try_lock_port(self, port):
    """The framework's port reservation (an exclusive lock file per port, then a bind to see the
    port is free), binding loopback instead of every interface."""
    lockfile = open(os.path.join(self.LOCKS_DIR, "port%d.lock" % port), "w")
    try:
        fcntl.flock(lockfile, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lockfile.close()
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            lockfile.close()
            return False
    self.open_and_locked_files[port] = lockfile
    return True


def pytest_collection_finish(session):
    """Every test module (and the framework's, imported by them) is loaded now; the framework may
    be imported under two names (its conftest is also pytest's), so every copy is patched."""
    patched = 0
    for module in list(sys.modules.values()):
        base = getattr(module, "ValkeyTestCaseBase", None)
        if isinstance(base, type) and "_get_valkey_args" in vars(base):
            if not getattr(base._get_valkey_args, "bloomgate_loopback", False):
                base._get_valkey_args = _loopback_args(base._get_valkey_args)
            base.DEFAULT_BIND_IP = LOOPBACK
            patched += 1
        handle = getattr(module, "ValkeyServerHandle", None)
        if isinstance(handle, type):
            handle.DEFAULT_BIND_IP = LOOPBACK
        tracker = getattr(module, "PortTracker", None)
        if isinstance(tracker, type) and hasattr(tracker, "_try_lock_port"):
            tracker._try_lock_port = _try_lock_port
    if session.items and not patched:
        raise RuntimeError("valkey_bloom_loopback: the test framework's ValkeyTestCaseBase was not "
                           "found; its servers would bind every interface")
