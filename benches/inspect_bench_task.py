"""Writes a large, real Inspect AI `.eval` log offline, for benches/import_bench.py.

Each sample is a small coding task run by a `react()` agent with the `bash()` tool in a
`local` sandbox. The model is `mockllm/model` with scripted tool calls (`custom_outputs`),
so no network is needed, but every command really runs, and Inspect itself writes the
log (model, tool, sandbox-exec, span, score events). The bulk of the bytes comes from
what agent logs are mostly made of: long tool outputs (a build log that `gen_log.py`
prints, pseudo-random so zstd cannot shrink it to nothing) and some assistant prose.

    python benches/inspect_bench_task.py --samples 2000 --log-dir DIR [--payload-kb 48]
"""
import argparse
import random
import re
import time

from inspect_ai import Task, eval
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

M = "mockllm/model"
APP = "def add(a, b):\n    return a - b\n"
TEST = "from app import add\nassert add(2, 3) == 5, add(2, 3)\nprint('1 passed')\n"
# Prints ~KB kilobytes of build-log lines, seeded so every sample differs.
GEN_LOG = """import random, sys
seed, kb = int(sys.argv[1]), int(sys.argv[2])
r = random.Random(seed)
words = 'compile link warning unused variable crate module resolve fetch cache hit miss test ok FAILED'.split()
out, n = [], 0
while n < kb * 1024:
    line = f"[{r.randint(0, 99999):05d}.{r.randint(0, 999):03d}] {r.choice(words)} {r.getrandbits(64):016x} " + ' '.join(r.choice(words) for _ in range(r.randint(3, 12)))
    out.append(line); n += len(line) + 1
print('\\n'.join(out))
"""
WORDS = ("the test fails because add subtracts its arguments so I will look at the build "
         "log first then run the tests again and fix app.py with a one line change").split()


def prose(seed: int, n_words: int) -> str:
    # Assistant text that differs per sample and per turn, like real model output.
    r = random.Random(seed)
    return " ".join(r.choice(WORDS) for _ in range(n_words)) + "."


def make_script(i: int, payload_kb: int) -> list[ModelOutput]:
    def tc(step, name, args):
        o = ModelOutput.for_tool_call(model=M, tool_name=name, tool_arguments=args,
                                      content=prose(i * 10 + step, 60 + step * 20))
        # Explicit usage: mockllm's default token counting would fetch a tiktoken file.
        o.usage = ModelUsage(input_tokens=400 + 300 * step, output_tokens=80, total_tokens=480 + 300 * step)
        return o
    return [
        tc(0, "bash", {"command": "ls -la"}),
        tc(1, "bash", {"command": "cat app.py test_app.py"}),
        tc(2, "bash", {"command": "python3 -c 'print(1)'"}),
        tc(3, "bash", {"command": f"python3 gen_log.py {i} {payload_kb}"}),
        tc(4, "bash", {"command": "python3 -m pytest -q test_app.py || python3 test_app.py"}),
        tc(5, "bash", {"command": "grep -n 'return' app.py"}),
        tc(6, "bash", {"command": "sed -i 's/a - b/a + b/' app.py && python3 test_app.py"}),
        tc(7, "bash", {"command": "git status 2>&1 | head -3; echo exit=$?"}),
        tc(8, "submit", {"answer": "add() now adds; test_app.py passes."}),
    ]


def scripted_outputs(payload_kb: int):
    # mockllm calls this with the conversation so far; the sample number is in the prompt.
    def outputs(input, tools, tool_choice, config):
        first = next(m for m in input if m.role == "user")
        i = int(re.search(r"\[sample (\d+)\]", first.text).group(1))
        step = sum(1 for m in input if m.role == "assistant")
        script = make_script(i, payload_kb)
        return script[step] if step < len(script) else ModelOutput.from_content(model=M, content="done")
    return outputs


@scorer(metrics=[accuracy()])
def tests_pass():
    async def score(state: TaskState, target: Target) -> Score:
        res = await sandbox().exec(["python3", target.text], timeout=30)
        return Score(value=CORRECT if res.returncode == 0 else INCORRECT, answer=state.output.completion,
                     explanation=f"exit={res.returncode}")
    return score


def bench_task(samples: int) -> Task:
    dataset = [Sample(id=f"fix-add-{i}", target="test_app.py", metadata={"repo": f"bench/app-{i % 50}"},
                      input=f"[sample {i}] add() is wrong. Fix app.py so that `python3 test_app.py` passes, then submit.",
                      files={"app.py": APP, "test_app.py": TEST, "gen_log.py": GEN_LOG})
               for i in range(samples)]
    return Task(name="epistore_bench", dataset=dataset, solver=react(tools=[bash(timeout=60)]),
                scorer=tests_pass(), sandbox="local", message_limit=30)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--payload-kb", type=int, default=48)
    ap.add_argument("--max-samples", type=int, default=8, help="samples run concurrently")
    # Inspect truncates tool output to 16 KiB by default; letting the build log through
    # whole gives more bytes per sample, i.e. a big log in minutes rather than hours.
    ap.add_argument("--max-tool-output-kb", type=int, default=1024)
    a = ap.parse_args()
    t0 = time.perf_counter()
    logs = eval(bench_task(a.samples), model=get_model(M, custom_outputs=scripted_outputs(a.payload_kb)),
                log_dir=a.log_dir, log_format="eval", display="none", max_samples=a.max_samples,
                max_subprocesses=a.max_samples, log_realtime=False,
                max_tool_output=a.max_tool_output_kb * 1024)
    for lg in logs:
        print(f"LOG {lg.location} {lg.status} {time.perf_counter() - t0:.1f}s", flush=True)
