#!/usr/bin/env bash
# A recipe's own entry point tutorrl has no entry for (SPPO: its code stops at import at every release measured).
set -x
python3 -m recipe.sppo.main_sppo \
    algorithm.adv_estimator=grpo \
    trainer.n_gpus_per_node=8 "$@"
