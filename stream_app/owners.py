"""Who owns which partition of the sessions topic, and where its web server answers.

Each worker puts its web address in its group membership; the group leader, assigning
partitions as Kafka's range assignor does, hands every member the map of sessions
partition -> owner address, so any worker can send a ``/sessions/{id}`` question to the
worker that holds the answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import orjson
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)


class Owners:
    def __init__(self, address: str, sessions_topic: str) -> None:
        self.address = address
        self.sessions_topic = sessions_topic
        self.by_partition: dict[int, str] = {}

    def assignor(self) -> type[AbstractPartitionAssignor]:
        """An assignor class bound to this worker (aiokafka takes classes, not instances)."""
        owners = self

        class OwnerAssignor(RangePartitionAssignor):  # type: ignore[misc]
            name = "range-with-owners"

            @classmethod
            def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
                return ConsumerProtocolMemberMetadata(
                    cls.version, list(topics), owners.address.encode()
                )

            @classmethod
            def assign(
                cls,
                cluster: ClusterMetadata,
                members: Mapping[str, ConsumerProtocolMemberMetadata],
            ) -> dict[str, ConsumerProtocolMemberAssignment]:
                assigned = super().assign(cluster, members)
                table = {
                    p: members[member].user_data.decode()
                    for member, assignment in assigned.items()
                    for topic, partitions in assignment.assignment
                    if topic == owners.sessions_topic
                    for p in partitions
                }
                shared = orjson.dumps(table, option=orjson.OPT_NON_STR_KEYS)
                return {
                    member: ConsumerProtocolMemberAssignment(a.version, a.assignment, shared)
                    for member, a in assigned.items()
                }

            @classmethod
            def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
                table = orjson.loads(assignment.user_data or b"{}")
                owners.by_partition = {int(p): address for p, address in table.items()}

        return OwnerAssignor

    def of(self, partition: int) -> str | None:
        return self.by_partition.get(partition)
