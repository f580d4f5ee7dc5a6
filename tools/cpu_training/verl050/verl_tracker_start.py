"""verl's own tracker (``verl.utils.tracking.Tracking``, as verl's trainer makes it) started with the mlflow
backend, in a training environment's Python: ``python verl_tracker_start.py PROJECT EXPERIMENT STEP RESUME_MODE``.

It logs the config (``trainer.resume_mode``) as MLflow parameters, one metric at STEP, and prints the run id
MLflow attached it to (tests/runtime/test_mlflow_run.py runs it in the verl 0.5.0 training environment and hands it ``MLFLOW_RUN_ID``).
"""

import sys

import mlflow
from verl.utils.tracking import Tracking

project, experiment, step, resume_mode = sys.argv[1:5]
tracker = Tracking(project_name=project, experiment_name=experiment, default_backend=["mlflow"],
                   config={"trainer": {"resume_mode": resume_mode}})
tracker.log({"actor/pg_loss": 0.5}, step=int(step))
print(mlflow.active_run().info.run_id)
