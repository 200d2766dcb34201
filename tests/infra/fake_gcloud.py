"""A recording stand-in for gcloud: keeps a project's resources in a JSON state file.

It answers the commands of infra's plans the way gcloud does (JSON describes, NOT_FOUND on
stderr with exit 1, resources that exist after create) and appends every argv to a log.
FAKE_GCLOUD_FAIL = '{"match": "<words of the argv>", "stderr": "..."}' makes one command fail.
Unknown commands exit 2, so a plan cannot use a command the fake (and the tests) never saw.
"""

from __future__ import annotations

import json
import os
import sys

# The fake runs once per gcloud call (hundreds per deploy test): json, os and sys only, as
# dataclasses, pathlib and typing would double its start (29 vs 52 ms a call).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

PROJECT_NUMBER = "123456789012"
COMMANDS = (
    "projects describe",
    "secrets describe",
    "secrets create",
    "secrets delete",
    "services list",
    "services enable",
    "firestore databases describe",
    "firestore databases create",
    "firestore databases delete",
    "firestore indexes composite list",
    "firestore indexes composite create",
    "firestore indexes fields describe",
    "firestore indexes fields update",
    "firestore fields ttls update",
    "tasks queues describe",
    "tasks queues create",
    "tasks queues update",
    "tasks queues delete",
    "scheduler jobs describe",
    "scheduler jobs create http",
    "scheduler jobs update http",
    "scheduler jobs delete",
    "iam service-accounts describe",
    "iam service-accounts create",
    "iam service-accounts delete",
    "functions describe",
    "functions deploy",
    "functions delete",
    "artifacts repositories describe",
    "artifacts repositories create",
    "artifacts repositories delete",
)
POLICY_GROUPS = (
    "projects",
    "iam service-accounts",
    "run services",
    "secrets",
    "tasks queues",
    "artifacts repositories",
)


class Exit(Exception):
    def __init__(self, code: int, stderr: str = "", stdout: Any = None) -> None:
        super().__init__(stderr)
        self.code, self.stderr, self.stdout = code, stderr, stdout


def parse(argv: list[str]) -> tuple[str, list[str], dict[str, list[str]]]:
    words = [word for word in argv if not word.startswith("--")]
    flags: dict[str, list[str]] = {}
    for word in argv:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            flags.setdefault(name, []).append(value)
    candidates = list(COMMANDS) + [
        f"{group} {verb}"
        for group in POLICY_GROUPS
        for verb in ("get-iam-policy", "add-iam-policy-binding", "remove-iam-policy-binding")
    ]
    for command in sorted(candidates, key=len, reverse=True):
        size = len(command.split())
        if words[:size] == command.split():
            return command, words[size:], flags
    raise Exit(2, f"fake gcloud: unsupported command {' '.join(argv)}")


def not_found(what: str) -> Exit:
    return Exit(1, f"ERROR: NOT_FOUND: {what} was not found\n")


def pairs(value: str) -> dict[str, str]:
    delimiter = ","
    if value.startswith("^"):
        delimiter, value = value[1], value[3:]
    return dict(item.split("=", 1) for item in value.split(delimiter) if item)


def seconds(value: str) -> str:
    # The API writes durations back in its own format, not the one they were set in.
    return f"{float(value.removesuffix('s')):.3f}s"


def handle(
    state: dict[str, Any], command: str, args: list[str], flags: dict[str, list[str]]
) -> Any:
    one = {name: values[-1] for name, values in flags.items()}
    project = one["project"]
    if command.endswith(("get-iam-policy", "add-iam-policy-binding", "remove-iam-policy-binding")):
        return policy(state, command, args[0], one)
    if command == "projects describe" or command.startswith("secrets"):
        return secret(state, command, args[0], one)
    if command.startswith("services"):
        return services(state, command, args)
    if command.startswith("firestore databases"):
        key = f"database/{one.get('database', '(default)')}"
        if command.endswith("create"):
            state[key] = {"type": "FIRESTORE_NATIVE", "locationId": one["location"]}
            return None
        if key not in state:
            raise Exit(1, f"ERROR: NOT_FOUND: Project '{project}' or database does not exist.\n")
        return state.pop(key) if command.endswith("delete") else state[key]
    if command == "firestore indexes composite list":
        return state.setdefault("indexes", [])
    if command == "firestore indexes composite create":
        indexes = state.setdefault("indexes", [])
        fields = []
        for config in flags["field-config"]:
            spec = pairs(config)
            kind = "order" if "order" in spec else "arrayConfig"
            value = spec.get("order") or spec["array-config"]
            fields.append({"fieldPath": spec["field-path"], kind: value.upper()})
        fields.append({"fieldPath": "__name__", "order": "ASCENDING"})
        group = one["collection-group"]
        indexes.append(
            {
                "name": f"projects/{project}/databases/(default)/collectionGroups/{group}"
                f"/indexes/I{len(indexes)}",
                "queryScope": one.get("query-scope", "collection").upper().replace("-", "_"),
                "fields": fields,
                "state": "READY",
            }
        )
        return None
    if command.startswith(("firestore indexes fields", "firestore fields ttls")):
        key = f"field/{one['collection-group']}/{args[0]}"
        defaults = [
            {"queryScope": "COLLECTION", "fields": [{"fieldPath": args[0], **spec}]}
            for spec in (
                {"order": "ASCENDING"},
                {"order": "DESCENDING"},
                {"arrayConfig": "CONTAINS"},
            )
        ]
        field = state.setdefault(
            key, {"indexConfig": {"usesAncestorConfig": True, "indexes": defaults}}
        )
        if command == "firestore fields ttls update":
            field["ttlConfig"] = {"state": "CREATING"}
        elif command == "firestore indexes fields update":
            field["indexConfig"] = {
                "usesAncestorConfig": False,
                "indexes": [
                    {
                        "queryScope": spec.pop("query-scope", "collection").upper(),
                        "fields": [
                            {"fieldPath": args[0], "order": spec["order"].upper()}
                            if "order" in spec
                            else {"fieldPath": args[0], "arrayConfig": spec["array-config"].upper()}
                        ],
                    }
                    for spec in map(pairs, flags.get("index", []))
                ],
            }
        return field
    if command.startswith("tasks queues"):
        key = f"queue/{args[0]}"
        if command.endswith(("create", "update")):
            if command.endswith("create") and key in state:
                raise Exit(1, "ERROR: ALREADY_EXISTS: queue exists\n")
            state[key] = {
                "name": f"projects/{project}/locations/{one['location']}/queues/{args[0]}",
                "retryConfig": {
                    "maxAttempts": int(one["max-attempts"]),
                    "minBackoff": seconds(one["min-backoff"]),
                    "maxBackoff": seconds(one["max-backoff"]),
                    "maxDoublings": int(one["max-doublings"]),
                    "maxRetryDuration": seconds(one["max-retry-duration"]),
                },
                "rateLimits": {
                    "maxDispatchesPerSecond": float(one["max-dispatches-per-second"]),
                    "maxConcurrentDispatches": int(one["max-concurrent-dispatches"]),
                    "maxBurstSize": 100,
                },
                "state": "RUNNING",
            }
            return state[key]
        if key not in state:
            raise not_found(f"queue {args[0]}")
        return state.pop(key) if command.endswith("delete") else state[key]
    if command.startswith("scheduler jobs"):
        return scheduler_job(state, command, args[0], one)
    if command.startswith("iam service-accounts"):
        email = args[0] if "@" in args[0] else f"{args[0]}@{project}.iam.gserviceaccount.com"
        key = f"account/{email}"
        if command.endswith("create"):
            state[key] = {"email": email, "displayName": one.get("display-name", "")}
            return state[key]
        if key not in state:
            raise Exit(1, f"ERROR: NOT_FOUND: Unknown service account {email}\n")
        return state.pop(key) if command.endswith("delete") else state[key]
    if command.startswith("functions"):
        return function(state, command, args[0], one, flags)
    if command.startswith("artifacts repositories"):
        return repository(state, command, args[0], one)
    raise Exit(2, f"fake gcloud: no behaviour for {command}")


def services(state: dict[str, Any], command: str, args: list[str]) -> Any:
    """The project's enabled APIs."""
    enabled = state.setdefault("apis", [])
    if command == "services enable":
        enabled.extend(api for api in args if api not in enabled)
        return None
    return [{"config": {"name": api}} for api in enabled]


def repository(state: dict[str, Any], command: str, name: str, one: dict[str, str]) -> Any:
    """Artifact Registry repositories: made, described, deleted with their policy."""
    key = f"repository/{name}"
    if command.endswith("create"):
        if key in state:
            raise Exit(1, "ERROR: ALREADY_EXISTS: the repository already exists\n")
        state[key] = {
            "name": f"projects/{one['project']}/locations/{one['location']}/repositories/{name}",
            "format": one["repository-format"].upper(),
        }
        return state[key]
    if key not in state:
        raise not_found(f"repository {name}")
    if command.endswith("delete"):
        state.pop(f"policy/artifacts repositories/{name}", None)
        return state.pop(key)
    return state[key]


def secret(state: dict[str, Any], command: str, name: str, one: dict[str, str]) -> Any:
    """The project's number, and Secret Manager's secrets (kept with their values, for the
    tests to check what the deploy generated; a describe shows their size, as gcloud's
    shows no value)."""
    if command == "projects describe":
        return {"projectId": name, "projectNumber": PROJECT_NUMBER, "lifecycleState": "ACTIVE"}
    key = f"secret/{name}"
    if command == "secrets create":
        if key in state:
            raise Exit(1, f"ERROR: ALREADY_EXISTS: Secret [{name}] already exists.\n")
        data = sys.stdin.read() if one.get("data-file") == "-" else ""
        if not data:
            raise Exit(1, "ERROR: (gcloud.secrets.create) the secret's data is empty\n")
        name_ = f"projects/{PROJECT_NUMBER}/secrets/{name}"
        state[key] = {"name": name_, "size": len(data), "value": data}
        return {"name": name_, "size": len(data)}
    if key not in state:
        raise not_found(f"secret {name}")
    found = state.pop(key) if command == "secrets delete" else state[key]
    return {"name": found["name"], "size": found.get("size", 0)}


def scheduler_job(state: dict[str, Any], command: str, name: str, one: dict[str, str]) -> Any:
    project = one["project"]
    key = f"job/{name}"
    if command.endswith("http"):
        if command.startswith("scheduler jobs create") and key in state:
            raise Exit(1, "ERROR: ALREADY_EXISTS: job exists\n")
        if command.startswith("scheduler jobs update") and key not in state:
            raise not_found(f"job {name}")
        state[key] = {
            "name": f"projects/{project}/locations/{one['location']}/jobs/{name}",
            "schedule": one["schedule"],
            "timeZone": "Etc/UTC",
            "httpTarget": {
                "uri": one["uri"],
                "httpMethod": one["http-method"].upper(),
                "oidcToken": {
                    "serviceAccountEmail": one["oidc-service-account-email"],
                    "audience": one["oidc-token-audience"],
                },
            },
            "state": "ENABLED",
        }
        return state[key]
    if key not in state:
        raise not_found(f"job {name}")
    return state.pop(key) if command.endswith("delete") else state[key]


def policy(state: dict[str, Any], command: str, resource: str, one: dict[str, str]) -> Any:
    group = command.rsplit(" ", 1)[0]
    if group == "run services" and f"function/{resource}" not in state:
        raise not_found(f"service {resource}")
    if group == "tasks queues" and f"queue/{resource}" not in state:
        raise not_found(f"queue {resource}")
    if group == "secrets" and f"secret/{resource}" not in state:
        raise not_found(f"secret {resource}")
    if group == "iam service-accounts" and f"account/{resource}" not in state:
        raise Exit(1, f"ERROR: NOT_FOUND: Unknown service account {resource}\n")
    if group == "artifacts repositories" and f"repository/{resource}" not in state:
        raise not_found(f"repository {resource}")
    # role -> members, or "role|title|expression" for a binding held by a condition.
    bindings = state.setdefault(f"policy/{group}/{resource}", {})
    condition = one.get("condition", "None")
    if condition != "None" and group != "projects":
        raise Exit(1, "ERROR: this fake takes conditions on project policies only\n")
    if condition == "None":
        key = one.get("role", "")
    else:
        spec = pairs(condition)
        if not spec.get("title") or not spec.get("expression"):
            raise Exit(1, "ERROR: a condition needs expression= and title=\n")
        key = f"{one.get('role', '')}|{spec['title']}|{spec['expression']}"
    if command.endswith("add-iam-policy-binding"):
        member = one["member"]
        if member.startswith("serviceAccount:") and f"account/{member[15:]}" not in state:
            raise Exit(
                1, f"ERROR: INVALID_ARGUMENT: Service account {member[15:]} does not exist.\n"
            )
        members = bindings.setdefault(key, [])
        if member not in members:
            members.append(member)
    elif command.endswith("remove-iam-policy-binding"):
        members = bindings.get(key, [])
        if one["member"] not in members:
            raise Exit(
                1, "ERROR: Policy binding with the specified principal and role not found!\n"
            )
        members.remove(one["member"])
    return {
        "bindings": [shown(key, members) for key, members in bindings.items() if members],
        "etag": "BwX",
    }


def shown(key: str, members: list[str]) -> dict[str, Any]:
    """A binding as get-iam-policy describes it."""
    role, _, rest = key.partition("|")
    if not rest:
        return {"role": role, "members": members}
    title, _, expression = rest.partition("|")
    return {
        "role": role,
        "members": members,
        "condition": {"title": title, "expression": expression},
    }


def function(
    state: dict[str, Any], command: str, name: str, one: dict[str, str], flags: dict[str, list[str]]
) -> Any:
    key = f"function/{name}"
    if command == "functions describe":
        if key not in state:
            raise Exit(
                1,
                "ERROR: (gcloud.functions.describe) ResponseError: status=[404], code=[Ok], "
                f"message=[Resource 'projects/p/locations/r/functions/{name}' was not found]\n",
            )
        return state[key]
    if command == "functions delete":
        if key not in state:
            raise not_found(f"function {name}")
        state.pop(key)
        state.pop(f"policy/run services/{name}", None)
        return None
    if "source" not in one or not os.path.isfile(os.path.join(one["source"], "main.py")):
        raise Exit(1, "ERROR: (gcloud.functions.deploy) the source has no main.py\n")
    previous = state.get(key, {})
    labels = {**previous.get("labels", {}), "deployment-tool": "cli-gcloud"}
    labels.update(pairs(one.get("update-labels", "")))
    service: dict[str, Any] = {
        "availableMemory": one["memory"],
        "availableCpu": one["cpu"],
        "timeoutSeconds": int(one["timeout"].removesuffix("s")),
        "maxInstanceRequestConcurrency": int(one["concurrency"]),
        "maxInstanceCount": int(one["max-instances"]),
        "serviceAccountEmail": one["service-account"],
        "environmentVariables": {"LOG_EXECUTION_ID": "true", **pairs(one["set-env-vars"])},
        # The deterministic URL (the one displayed first, as Cloud Run does).
        "uri": f"https://{name}-{PROJECT_NUMBER}.{one['region']}.run.app",
        "ingressSettings": "ALLOW_ALL",
    }
    # Like the API, a zero minimum is left out of the description.
    if int(one["min-instances"]):
        service["minInstanceCount"] = int(one["min-instances"])
    if "set-secrets" in one:
        service["secretEnvironmentVariables"] = [
            {
                "key": env,
                "projectId": "1234",
                "secret": ref.split(":")[0],
                "version": ref.split(":")[1],
            }
            for env, ref in pairs(one["set-secrets"]).items()
        ]
    state[key] = {
        "name": f"projects/{one['project']}/locations/{one['region']}/functions/{name}",
        "environment": "GEN_2",
        "state": "ACTIVE",
        "buildConfig": {
            "runtime": one["runtime"],
            "entryPoint": one["entry-point"],
            **(
                {"serviceAccount": one["build-service-account"]}
                if "build-service-account" in one
                else {}
            ),
            **(
                {"dockerRepository": one["docker-repository"]} if "docker-repository" in one else {}
            ),
        },
        "serviceConfig": service,
        "labels": labels,
        "url": f"https://{one['region']}-{one['project']}.cloudfunctions.net/{name}",
    }
    bindings = state.setdefault(f"policy/run services/{name}", {})
    if "allow-unauthenticated" in flags:
        invokers = bindings.setdefault("roles/run.invoker", [])
        if "allUsers" not in invokers:
            invokers.append("allUsers")
    return state[key]


class FakeGcloud:
    """The fake's log and state, as a test reads them."""

    def __init__(self, log: Path, state: Path) -> None:
        self.log, self.state = log, state

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def changes(self) -> list[list[str]]:
        """The calls that change something, not those that only look."""
        looking = ("describe", "list", "get-iam-policy")
        return [call for call in self.calls() if not any(word in looking for word in call[:4])]

    def clear_log(self) -> None:
        self.log.unlink(missing_ok=True)


def main() -> int:
    argv = sys.argv[1:]
    with open(os.environ["FAKE_GCLOUD_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    state_file = os.environ["FAKE_GCLOUD_STATE"]
    state = {}
    if os.path.exists(state_file):
        with open(state_file) as saved:
            state = json.load(saved)
    failure = json.loads(os.environ.get("FAKE_GCLOUD_FAIL") or "null")
    try:
        if failure and failure["match"] in " ".join(argv):
            raise Exit(1, failure["stderr"])
        command, args, flags = parse(argv)
        result = handle(state, command, args, flags)
    except Exit as exit_:
        sys.stderr.write(exit_.stderr)
        return exit_.code
    with open(state_file, "w") as saved:
        json.dump(state, saved, indent=1)
    if result is not None and "format" in flags:
        sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
