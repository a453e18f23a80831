"""Every TrainingArguments name that curvediag writes exists in the transformers version that
wrote the run.

The field names of ``TrainingArguments`` per major version live in
``curvediag/data/training_arguments.yaml`` (read from transformers 4.57 and 5.23). Rule fix texts
and the report's next-run plan are scanned for ``name=`` / ``name: `` / ``name -> `` tokens; a
name that is not an argument of 5.x (the default) and not one of the other APIs named below fails.
Names that differ between versions come from the ``cfg.*`` features, which are checked per version.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from curvediag.features import FeatureSet
from curvediag.model import Run, RunMeta, Series

ROOT = Path(__file__).resolve().parents[1]


def _corpus_run(name: str) -> Path:
    """A real run of the shared corpus (the real-run benchmark reads its ``tune`` runs there)."""
    path = ROOT.parent / "shared" / "corpus" / name
    if not path.is_dir():
        pytest.skip("../shared/corpus not present")
    return path


FIELDS = {
    k: set(v)
    for k, v in yaml.safe_load(
        (ROOT / "curvediag/data/training_arguments.yaml").read_text(encoding="utf-8")
    ).items()
}
#: Arguments of other APIs that fix texts name (callbacks, PEFT, tokenizers, generation).
OTHER_APIS = {
    "early_stopping_patience",
    "early_stopping_threshold",  # EarlyStoppingCallback
    "max_length",
    "padding",
    "truncation",  # tokenizers
    "r",
    "lora_alpha",
    "lora_dropout",
    "target_modules",  # peft.LoraConfig
    "metric_for_best_model",
    "requires_grad",
}
_TOKEN = re.compile(r"`?\b([a-z][a-z0-9_]{2,})\b(?:\s*=(?!=)|:\s(?=[-\d.]|True|False)|\s*->)")


def _texts() -> list[tuple[str, str]]:
    out = []
    for p in sorted((ROOT / "rules").rglob("*.yaml")):
        if p.name.endswith(".test.yaml"):
            continue
        rule = yaml.safe_load(p.read_text(encoding="utf-8"))
        for fix in rule.get("fixes", []):
            out.append((p.name, fix))
    out.append(("next_run.py", (ROOT / "curvediag/report/next_run.py").read_text()))
    return out


def _names(text: str) -> set[str]:
    text = re.sub(r"\{[^{}]*\}", " ", text)  # template fields are features, not arguments
    return {m.group(1) for m in _TOKEN.finditer(text)}


def test_field_lists_know_the_5x_renames() -> None:
    assert {"warmup_ratio", "group_by_length"} <= FIELDS["4"]
    assert not {"warmup_ratio", "group_by_length", "evaluation_strategy"} & FIELDS["5"]
    assert {"warmup_steps", "train_sampling_strategy", "eval_strategy"} <= FIELDS["5"]


@pytest.mark.parametrize("where,text", _texts(), ids=lambda x: x if len(x) < 40 else "text")
def test_fix_texts_name_only_existing_arguments(where: str, text: str) -> None:
    if where == "next_run.py":
        # only the setting names the plan writes: the first argument of _setting(...)
        names = set(re.findall(r'_setting\(\s*"([a-z_]+)"', text))
    else:
        names = {n for n in _names(text) if "_" in n}
    unknown = sorted(n for n in names if n not in FIELDS["5"] and n not in OTHER_APIS)
    assert not unknown, f"{where}: not TrainingArguments of transformers 5.x: {unknown}"
    # names that 5.x removed must not appear even as bare words (e.g. "group_by_length,")
    if where != "next_run.py":
        bare = set(re.findall(r"\b[a-z][a-z0-9_]+\b", re.sub(r"\{[^{}]*\}", " ", text)))
        removed = sorted(bare & (FIELDS["4"] - FIELDS["5"]))
        assert not removed, f"{where}: names transformers 5.x removed: {removed}"


def _run(version: str | None, **meta: object) -> Run:
    hp = {"transformers_version": version} if version else {}
    steps = list(range(10, 410, 10))
    return Run(
        source="<t>",
        format="hf-trainer",
        name="t",
        meta=RunMeta(hyperparameters=hp, **meta),  # type: ignore[arg-type]
        metrics={"train/loss": Series(name="train/loss", steps=steps, values=[2.0] * 40)},
    )


@pytest.mark.parametrize("version,major", [("4.46.3", "4"), ("5.23.0", "5")])
def test_version_dependent_arguments_exist_in_that_version(version: str, major: str) -> None:
    fs = FeatureSet(_run(version, warmup_steps=0, max_grad_norm=0.0))
    for feat in (
        "cfg.warmup_arg",
        "cfg.warmup_short_arg",
        "cfg.length_grouping_arg",
        "cfg.clip_on_arg",
    ):
        value = fs.get(feat)
        assert isinstance(value, str), feat
        name = value.split("=", 1)[0]
        assert name in FIELDS[major], f"{feat} = {value!r} on transformers {version}"
    assert fs.get("cfg.transformers_major") == int(major)


def test_report_plan_uses_the_runs_version_for_warmup() -> None:
    from curvediag.report.context import ReportContext
    from curvediag.ruleset.engine import run_rules
    from curvediag.ruleset.loader import load_rules

    for version, want in (("4.40.0", "warmup_ratio"), ("5.2.0", "warmup_steps")):
        d = run_rules(_run(version, warmup_ratio=0.01), load_rules())
        assert ReportContext.of(d).warmup_ratio_arg() == want


def test_hyperparameter_table_never_names_warmup_ratio_for_a_5x_run() -> None:
    from curvediag.report.markdown import postmortem_markdown
    from curvediag.ruleset.engine import run_rules
    from curvediag.ruleset.loader import load_rules

    # transformers 5.x: warmup_steps=0.1 is a ratio; the reader keeps it as meta.warmup_ratio
    run = _run("5.2.0", warmup_ratio=0.1)
    run.meta.hyperparameters["warmup_steps"] = 0.1
    md = postmortem_markdown(run_rules(run, load_rules()))
    assert "| `warmup_steps` | 0.1 |" in md
    assert "warmup_ratio" not in md
    # a 4.x run that wrote warmup_ratio still sees its own setting
    run4 = _run("4.46.0", warmup_ratio=0.1)
    run4.meta.hyperparameters["warmup_ratio"] = 0.1
    assert "| `warmup_ratio` | 0.1 |" in postmortem_markdown(run_rules(run4, load_rules()))


def test_runs_from_other_training_loops_get_no_trainer_arguments() -> None:
    import curvediag
    from curvediag.ruleset.engine import names_trainer_api

    assert names_trainer_api("Keep save_steps aligned: save_steps: 100 -> 50")
    assert names_trainer_api("Resume with trainer.train(resume_from_checkpoint=True).")
    assert names_trainer_api("Add EarlyStoppingCallback(early_stopping_patience=3).")
    assert not names_trainer_api("Check the job's log around step 2400.")
    # nanoGPT (W&B binary log; its config names max_iters, not TrainingArguments)
    nano = curvediag.diagnose(_corpus_run("wbb_nanogpt_druid"))
    assert nano.features["cfg.trainer_run"] is False
    fixes = [fix for f in nano.findings for fix in f.fixes]
    assert fixes and not any(names_trainer_api(x) for x in fixes), fixes
    # the same rule on a Trainer run keeps its Trainer advice
    killed = curvediag.diagnose(ROOT / "fixtures/hf/run_killed/checkpoint-100")
    assert killed.features["cfg.trainer_run"] is True
    ended = next(f for f in killed.findings if f.rule_id == "run-ended-early")
    assert any("resume_from_checkpoint=True" in x for x in ended.fixes)


def test_the_resume_advice_names_the_loop_that_wrote_the_run() -> None:
    # a Lightning run resumes with trainer.fit(ckpt_path=...); a loop curvediag cannot name
    # (a NumPy seq2seq's console log) gets the advice in plain words, no Trainer call
    import curvediag

    runs = ROOT / "benchmarks/real_runs"
    pl = curvediag.diagnose(runs / "pl48c_imagebind_meld_probe_3of500ep_still_falling")
    ended = next(f for f in pl.findings if f.rule_id == "run-ended-early")
    assert any('trainer.fit(model, ckpt_path="last")' in x for x in ended.fixes), ended.fixes
    txt = curvediag.diagnose(runs / "txt30f_numpy_seq2seq_en_fr_sgd_stopped_3k_of_10k")
    assert txt.features["cfg.trainer_run"] is None
    ended = next(f for f in txt.findings if f.rule_id == "run-ended-early")
    assert any(x.startswith("Resume from the last checkpoint, restoring") for x in ended.fixes)
    assert not any("trainer." in x for f in txt.findings for x in f.fixes)


def test_a_setting_in_the_runs_own_config_is_kept_for_other_loops() -> None:
    import curvediag
    from curvediag.report.next_run import next_run_changes

    # a plain PyTorch loop logged to W&B whose config has its own learning_rate
    d = curvediag.diagnose(ROOT / "benchmarks/real_runs/wbb_vqvae_quantloss")
    assert d.features["cfg.trainer_run"] is False
    assert "learning_rate" in d.run.meta.hyperparameters
    assert any(c.setting == "learning_rate" for c in next_run_changes(d))
    # nanoGPT's config has no save_steps: Trainer-only settings stay out of its plan
    nano = curvediag.diagnose(_corpus_run("wbb_nanogpt_druid"))
    assert all(c.setting in (None, *nano.run.meta.hyperparameters) for c in next_run_changes(nano))
    kobert = curvediag.diagnose(ROOT / "benchmarks/real_runs/wbb_kobert_nsmc_bs32")
    plan = next_run_changes(kobert)
    assert plan and not any(c.setting in ("max_steps", "weight_decay") for c in plan)


def test_other_loops_get_their_warmup_and_clipping_in_their_own_terms() -> None:
    # a plain loop's JSON history (a real one: holdout16 js16e_qwen05b_lora_muon_owt_diverge,
    # 1500 steps, nothing naming the Trainer): the warmup target is a number of steps, never a
    # TrainingArguments field it cannot set
    import curvediag

    d = curvediag.diagnose(ROOT / "benchmarks/real_runs/js16e_qwen05b_lora_muon_owt_diverge")
    assert d.features["cfg.trainer_run"] is None
    assert d.features["cfg.warmup_arg"] == "a linear warmup over the first 150 steps"
    assert (
        d.features["cfg.length_grouping_arg"] == "batches of similar lengths from the data loader"
    )
    text = " ".join(fix for f in d.findings for fix in f.fixes)
    assert "150 steps" in text and "warmup_steps=" not in text and "warmup_ratio" not in text
    # a nanoGPT config with clipping off (grad_clip 0.0) is told its own setting
    run = _run(None, max_grad_norm=0.0)
    run.format = "wandb-run"
    run.meta.hyperparameters.update({"grad_clip": 0.0, "max_iters": 400})
    fs = FeatureSet(run)
    assert fs.get("cfg.trainer_run") is False
    assert fs.get("cfg.clip_on_arg") == "grad_clip=1.0"
    assert fs.get("cfg.warmup_short_arg") == "a linear warmup over the first 20 steps"


def test_overfitting_fixes_speak_the_run_s_loop() -> None:
    """Keeping the best checkpoint and stopping early are said in the words of the loop that
    wrote the run: a Keras CSVLogger file or a Lightning log is never told to set
    TrainingArguments, and a run that already stops early is not told to add it."""
    import curvediag

    real = ROOT / "benchmarks" / "real_runs"

    def fixes(path: Path) -> str:
        d = curvediag.diagnose(path)
        found = [f for f in d.findings if f.rule_id == "overfitting"]
        assert found, [f.rule_id for f in d.findings]
        return " ".join(found[0].fixes)

    keras = fixes(real / "csv45e_speech_digit_cnn_keras_semicolon" / "model_history_log.csv")
    assert "load_best_model_at_end" not in keras and "EarlyStoppingCallback" not in keras
    assert 'ModelCheckpoint(monitor="val_loss", save_best_only=True)' in keras
    lightning = fixes(real / "pl26e_layoutlmv3_medical_docs_val_rise_early_stop")
    assert "load_best_model_at_end" not in lightning
    assert 'EarlyStopping(monitor="val_loss", patience=3' in lightning
    trainer = fixes(ROOT / "fixtures" / "hf" / "overfit")
    assert 'metric_for_best_model="eval_loss"' in trainer and "EarlyStoppingCallback(" in trainer
    # the same Trainer run with its early stopping configured: no advice to add it
    run = curvediag.load_run(ROOT / "fixtures" / "hf" / "overfit")
    run.meta.early_stopping_patience = 3
    d = curvediag.diagnose(run)
    text = " ".join(next(f for f in d.findings if f.rule_id == "overfitting").fixes)
    assert "early stopping" not in text.lower()


def test_score_fixes_speak_the_run_s_loop() -> None:
    """eval-score-falls-after-best on a plain per-epoch log (a real one: tune12
    csv_cat_breed_effnetb0_l2) keeps the best checkpoint in words, not TrainingArguments."""
    import curvediag

    path = ROOT / "benchmarks" / "real_runs" / "csv_cat_breed_effnetb0_l2"
    d = curvediag.diagnose(path)
    found = next(f for f in d.findings if f.rule_id == "eval-score-falls-after-best")
    text = " ".join(found.fixes)
    assert "load_best_model_at_end" not in text and "EarlyStoppingCallback" not in text
    assert "keeping the one with the best score" in text


def test_every_keep_best_and_early_stop_fix_speaks_the_run_s_loop() -> None:
    """The staircase, eval-rise and huge-gap fixes use the same loop-aware phrases: a
    Lightning TensorBoard run (a real one: tune17 tb17c_gru_next_word_no_val) is told about its
    EarlyStopping callback, never EarlyStoppingCallback or load_best_model_at_end."""
    import curvediag

    d = curvediag.diagnose(ROOT / "benchmarks" / "real_runs" / "tb17c_gru_next_word_no_val")
    found = next(f for f in d.findings if f.rule_id == "loss-drops-at-epoch-boundaries")
    text = " ".join(found.fixes)
    assert 'EarlyStopping(monitor="val_loss"' in text
    assert "EarlyStoppingCallback" not in text and "load_best_model_at_end" not in text
    for rule in ("train-eval-gap-huge", "eval-loss-rising"):
        fixes = (ROOT / "rules" / "generalization" / f"{rule}.yaml").read_text(encoding="utf-8")
        assert "{cfg.keep_best_loss_arg}" in fixes and "load_best_model_at_end" not in fixes


@pytest.mark.parametrize(
    ("extra", "says", "never"),
    [
        ({"peft_config": {"r": 8}}, "a lower LoRA rank", "data augmentation"),
        ({"_name_or_path": "bert-base-uncased"}, "data augmentation", "LoRA"),
        ({}, "a lower LoRA rank if it trains adapters", "data augmentation"),
    ],
)
def test_regularisation_advice_fits_what_the_run_trains(
    extra: dict[str, object], says: str, never: str
) -> None:
    """A lower LoRA rank is advice for adapters only; a whole model gets dropout or
    augmentation; a run that says neither gets both, the LoRA part conditional."""
    run = _run("5.23.0")
    run.meta.hyperparameters.update(extra)
    text = FeatureSet(run).get("cfg.regularise_arg")
    assert isinstance(text, str) and says in text and never not in text
