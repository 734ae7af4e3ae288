"""A real Redis, replicas of ``replica_app.py`` and a Caddy load balancer, all on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkernel_redis.testing import LoadBalancer, RedisServer, Replica, start_replicas

APP = f"{Path(__file__).parent / 'replica_app.py'}:server"


class Cluster:
    """Redis, three replicas sharing it, and Caddy round-robin in front of them."""

    def __init__(self, redis: RedisServer, replicas: list[Replica], balancer: LoadBalancer) -> None:
        self.redis = redis
        self.replicas = replicas
        self.balancer = balancer

    def stop(self) -> None:
        self.balancer.stop()
        for replica in self.replicas:
            replica.stop()
        self.redis.stop()


def start_cluster(tmp: Path, count: int = 3) -> Cluster:
    redis = RedisServer(str(tmp)).start()
    try:
        replicas = start_replicas(APP, count, shared_state=redis.url, log_dir=tmp)
    except BaseException:
        redis.stop()
        raise
    balancer = LoadBalancer([f"127.0.0.1:{r.port}" for r in replicas], str(tmp))
    cluster = Cluster(redis, replicas, balancer)
    try:
        balancer.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for the tests that leave it as they found it."""
    running = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield running
    running.stop()


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster a test may break (kill a replica)."""
    running = start_cluster(tmp_path)
    yield running
    running.stop()
