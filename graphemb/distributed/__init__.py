"""The process runtime under the storages: the job's store (:mod:`.coordination`),
collectives (:mod:`.exchange`), shared-memory segments (:mod:`.shm`) and mailboxes
(:mod:`.mailbox`), machines of the ranks (:mod:`.topology`) and huge-page allocation
(:mod:`.huge_pages`). It knows processes and bytes, never what rows mean.
"""

from .coordination import CoordinationError

__all__ = ["CoordinationError"]
