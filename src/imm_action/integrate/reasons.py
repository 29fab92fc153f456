"""Every reason code a reconcile pass writes (SPEC §5.2, §5.4). Only the decide room — this
package's pure modules — spells them; drivers and git mechanics never do."""

from __future__ import annotations

from typing import Final

from imm_action.plan.lane_change import (
    GIT_PATH,
    GITLINK,
    OUTSIDE_SCOPE,
    SYMLINK_OUT,
    TOUCHES_CHECK,
    TOUCHES_PLAN,
)

PLAN_CHANGED: Final = "batch_plan_changed"
LINEAGE_BROKEN: Final = "batch_head_lineage_broken"
LANE_LOST: Final = "batch_lane_lost"
CONFLICT: Final = "batch_integration_conflict"
CHECK_FAILED: Final = "batch_integration_check_failed"
# The batch's reason, not a child's: a check of a task the branch holds fails on the batch head
# itself, twice — a person's matter (flaky, or the environment changed), never a lane's.
HEAD_CHECK_FAILED: Final = "batch_head_check_failed"
# The batch's reason: the base fails the repository's branch checks before any lane started
# (issue 44): every lane would be blamed for it, so none starts.
BASE_CHECK_FAILED: Final = "batch_base_check_failed"
CANCELLED: Final = "cancelled"
# The batch's reason: the workflow run carrying its lanes was cancelled (the Actions UI, the
# API, `/imm cancel`); a person's stop, never a lost lane's.
RUN_CANCELLED: Final = "batch_run_cancelled"
# A lane publishes its outcome and its branch in one CAS: disagreement means another writer.
OUTCOME_MISMATCH: Final = "lane_outcome_mismatch"

# A refusal, not a child's reason: a resume asked for another max_parallel than the batch's.
PARALLEL_MISMATCH: Final = "batch_parallel_mismatch"

# A parked child's pending dependents are skipped with this reason.
DEPENDENCY_PARKED: Final = "dependency {task_id} parked"
LANE_NEEDS_PERSON: Final = "the lane needs a person"
# what a batch without branch checks says wherever it reports (issue 62 #1)
NO_BRANCH_CHECKS: Final = (
    "no branch checks: only the tasks' own checks gate a move (set branch_checks in "
    ".github/imm.yml to the repository's suite; imm init finds it)"
)
# what a batch whose executors reach any host says where unconfined lane code is told (issue 60)
OPEN_LANE_NETWORK: Final = (
    "lane network open: executors reach any host (set lane_network in .github/imm.yml to the "
    "hosts they need)"
)

ALL_CODES: Final = (
    PLAN_CHANGED, LINEAGE_BROKEN, LANE_LOST, CONFLICT, CHECK_FAILED, CANCELLED, OUTCOME_MISMATCH,
    # what a lane commit may change, one pure rule shared with the lanes (plan/lane_change.py)
    GIT_PATH, GITLINK, SYMLINK_OUT, OUTSIDE_SCOPE, TOUCHES_PLAN, TOUCHES_CHECK,
)  # fmt: skip
