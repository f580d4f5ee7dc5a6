"""Questions asked of the job's Python before a run: a standalone program.

The job's Python (TUTORRL_PYTHON) may be another environment, with verl and
no tutorrl, so this file imports nothing of tutorrl and is run by its path::

    python job_probe.py stack ASK_JSON          what runtime/stack.py's probe asks (see there)
    python job_probe.py reward MODULE FUNCTION  whether verl's reward workers can import MODULE.FUNCTION
    python job_probe.py verl-version            verl's installed release (nothing printed without one)
    python job_probe.py merger                  verl's release and whether it has verl.model_merger
    python job_probe.py merge-lora SRC DST      lora_adapter/ merged into SRC's weights (peft), written to DST
    python job_probe.py mlflow-run ASK_JSON     the MLflow run a verl launch logs into (see runtime/mlflow_run.py)
    python job_probe.py mlflow-close ASK_JSON   the tutorrl run's MLflow run closed, its steps' metrics logged

Each answer is one JSON object (or a line, for verl-version) on the standard
output as it was when the program started; what the imported modules print
goes to the standard error. The folder the program is started in is first on
the path, as ``python -c`` and ``python -m verl...`` put it (not this file's
folder, which holds tutorrl's own modules). It runs on whatever Python the job
has: no syntax newer than the oldest Python verl supports.
"""
import sys

if __name__ == "__main__":  # run, not imported (a test): the job's folder first, not this file's
    sys.path[0] = ""  # what python -c puts there; python SCRIPT puts the script's folder

import importlib  # noqa: E402 - after the path is the job's
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402


def _failure(exc):
    import traceback

    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return {"kind": "missing", "name": exc.name}
    frames = traceback.extract_tb(exc.__traceback__)
    where = "%s:%s" % (frames[-1].filename, frames[-1].lineno) if frames else ""
    return {"kind": "error", "error": "%s: %s" % (type(exc).__name__, exc), "where": where}


def stack(ask, answer):
    """Installed versions of the named distributions, then each module imported (one failure does
    not hide the next), then the release's replica loader called with the engine's name."""
    from importlib import metadata

    versions = {}
    for name in ask["packages"]:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    modules = {}
    for name in ask["modules"]:
        try:
            importlib.import_module(name)
            modules[name] = None
        except BaseException as exc:  # noqa: BLE001 - each module's failure is an answer
            modules[name] = _failure(exc)
    replica = None
    if ask.get("replica") and ask.get("engine"):
        where, _, attr = ask["replica"].partition(":")
        try:
            getattr(importlib.import_module(where), attr)(ask["engine"])
        except BaseException as exc:  # noqa: BLE001
            replica = _failure(exc)
    answer({"python": "%d.%d" % sys.version_info[:2], "versions": versions, "modules": modules,
            "replica": replica})


def reward(module, function, answer):
    """Import ``module`` (a module may print on import) and find ``function`` in it."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        name = exc.name or ""
        if name and (module == name or module.startswith(name + ".")):
            return answer({"kind": "missing", "name": name})
        return answer({"kind": "dependency", "name": name, "error": "%s: %s" % (type(exc).__name__, exc)})
    except BaseException as exc:  # noqa: BLE001 - whatever the import raises is the answer
        return answer(_failure(exc))  # not ModuleNotFoundError (above): kind "error"
    where = getattr(mod, "__file__", None) or module
    fn = getattr(mod, function, None)
    if fn is None:
        names = sorted(n for n in vars(mod) if not n.startswith("_") and callable(vars(mod)[n])
                       and getattr(vars(mod)[n], "__module__", None) == mod.__name__)
        return answer({"kind": "no-function", "file": where, "names": names[:12]})
    if not callable(fn):
        return answer({"kind": "not-callable", "file": where, "type": type(fn).__name__})
    return answer({"kind": "ok", "file": where})


def merger(answer):
    """verl's release and whether its wheel has the model merger (``python -m verl.model_merger``),
    found without importing verl (its import pulls torch)."""
    from importlib import metadata
    import importlib.util

    spec = importlib.util.find_spec("verl")
    where = list(spec.submodule_search_locations or []) if spec else []
    try:
        version = metadata.version("verl")
    except metadata.PackageNotFoundError:
        version = None
    answer({"verl": version, "merger": any(os.path.isfile(os.path.join(d, "model_merger", "__main__.py"))
                                           for d in where)})


def merge_lora(src, dst):
    """The merger's folder ``src`` (base weights and lora_adapter/) as one model in ``dst``."""
    # The job environment's packages (its training stack has both), never tutorrl's own dependencies:
    # looked up by name, as the stack role imports the modules it is asked about.
    peft = importlib.import_module("peft")
    transformers = importlib.import_module("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(src)
    model = peft.PeftModel.from_pretrained(model, os.path.join(src, "lora_adapter")).merge_and_unload()
    model.save_pretrained(dst, safe_serialization=True)
    transformers.AutoTokenizer.from_pretrained(src).save_pretrained(dst)


def _mlflow_client(ask):
    mlflow = importlib.import_module("mlflow")
    mlflow.set_tracking_uri(ask["uri"])
    return mlflow, importlib.import_module("mlflow.tracking").MlflowClient()


def mlflow_run(ask, answer):
    """The tutorrl run's MLflow run (``ask["parent"]``, else made now in the experiment verl will name, with
    ``parent_tags`` and ``parent_params``), and under it a new run for this launch of verl (``tags``), in the
    same experiment: the one verl is told to log into."""
    try:
        _, client = _mlflow_client(ask)
        parent = ask.get("parent")
        if parent:
            experiment_id = client.get_run(parent).info.experiment_id
        else:
            found = client.get_experiment_by_name(ask["experiment"])
            experiment_id = found.experiment_id if found else client.create_experiment(ask["experiment"])
            parent = client.create_run(experiment_id, run_name=ask.get("run_name"),
                                       tags=ask["parent_tags"]).info.run_id
            for key, value in sorted(ask["parent_params"].items()):
                client.log_param(parent, key, value)
        tags = dict(ask["tags"], **{"mlflow.parentRunId": parent})
        child = client.create_run(experiment_id, run_name=ask.get("run_name"), tags=tags).info.run_id
    except BaseException as exc:  # noqa: BLE001 - the store's refusal is the answer
        return answer(_failure(exc))
    answer({"kind": "ok", "parent": parent, "run": child, "experiment_id": experiment_id})


def mlflow_close(ask, answer):
    """Each launch's run ended with its attempt's status; the tutorrl run's MLflow run given every step's
    metrics as tutorrl read them from verl (the last value of a step trained twice), then ended."""
    try:
        mlflow, client = _mlflow_client(ask)
        entities = importlib.import_module("mlflow.entities")
        for run_id, status in ask["runs"]:  # the attempt's outcome, whatever verl's process left (a kill: RUNNING)
            client.set_terminated(run_id, status)
        points = {}
        try:
            with open(ask["metrics_file"]) as fh:
                for line in fh:
                    if line.strip():
                        point = json.loads(line)
                        points[point["step"]] = point
        except OSError:
            pass
        name = re.compile(r"^[/\w.\- :]{1,250}$")  # MLflow's own rule for metric names
        batch = []
        for step in sorted(points):
            stamp = int(points[step].get("time", 0) * 1000)
            for key, value in sorted((points[step].get("metrics") or {}).items()):
                key = key.replace("@", "_at_")  # as verl's MLflow logger names them
                if isinstance(value, (int, float)) and not isinstance(value, bool) and name.match(key):
                    batch.append(entities.Metric(key, float(value), stamp, step))
        for start in range(0, len(batch), 1000):  # MLflow takes at most 1000 metrics a batch
            client.log_batch(ask["parent"], metrics=batch[start:start + 1000])
        client.set_terminated(ask["parent"], ask["status"])
    except BaseException as exc:  # noqa: BLE001
        return answer(_failure(exc))
    answer({"kind": "ok", "steps": sorted(points)})


def main():
    role, args = sys.argv[1], sys.argv[2:]
    if role == "verl-version":
        from importlib import metadata

        print(metadata.version("verl"))
        return
    if role == "merge-lora":
        merge_lora(args[0], args[1])
        return
    out = os.dup(1)
    os.dup2(2, 1)

    def answer(result):
        sys.stdout.flush()
        os.write(out, json.dumps(result).encode())
        os._exit(0)

    if role == "stack":
        stack(json.loads(args[0]), answer)
    elif role == "reward":
        reward(args[0], args[1], answer)
    elif role == "merger":
        merger(answer)
    elif role == "mlflow-run":
        mlflow_run(json.loads(args[0]), answer)
    elif role == "mlflow-close":
        mlflow_close(json.loads(args[0]), answer)
    else:
        raise SystemExit("job_probe.py: no role %r" % role)


if __name__ == "__main__":
    main()
