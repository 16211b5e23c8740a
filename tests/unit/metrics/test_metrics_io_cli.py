"""Score files, the `vpeval metrics` command, figures, the per-speaker breakdown and the bootstrap."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.errors import VpevalError
from pipeline.metrics import (
    SUMMARY_KEYS,
    ScoreError,
    bootstrap_ci,
    calibration_extension,
    det_curve,
    ece_profile,
    eer,
    min_cllr,
    read_scores,
    similarity_metrics,
    speaker_breakdown,
    summary,
)
from pipeline.app.metrics_cli import main
from pipeline.metrics.bootstrap import TRIALS_NOTE
from pipeline.metrics.detection import Trusted, assess
from pipeline.metrics.results import JudgedPair
from pipeline.report.figures import (
    LABEL_LIMIT,
    det_figure,
    detection_figure,
    detection_plot,
    ece_profiles_figure,
    similarity_matrices_figure,
)

PNG = b"\x89PNG\r\n\x1a\n"


def _write(path: Path, lines) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _trials(path: Path, seed: int = 0, speakers: int = 6, per_speaker: int = 25) -> Path:
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(speakers):
        for u in range(per_speaker):
            target = u % 4 == 0
            owner = s if target else (s + 1 + u % (speakers - 1)) % speakers
            score = rng.normal(2.0 if target else 0.0)
            lines.append(f"spk{s} utt{owner}_{u} {score:.6f} {'target' if target else 'nontarget'}")
    return _write(path, lines)


def _tables(folder: Path, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    segments = [(f"s{k}", f"s{k}_{u}") for k in range(5) for u in range(4)]
    oo, op, pp = [], [], []
    for i, (sa, ga) in enumerate(segments):
        for sb, gb in segments[i + 1:]:
            oo.append(f"{sa} {ga} {sb} {gb} {rng.normal(3 if sa == sb else 0):.5f}")
            pp.append(f"{sa} {ga} {sb} {gb} {rng.normal(1 if sa == sb else 0):.5f}")
        for sb, gb in segments:
            op.append(f"{sa} {ga} {sb} {gb} {rng.normal(0.3 if sa == sb else 0):.5f}")
    return [_write(folder / f"{name}.txt", lines) for name, lines in (("oo", oo), ("op", op), ("pp", pp))]


# ---------------------------------------------------------------- score files


def test_read_the_three_formats(tmp_path):
    labelled = read_scores(_write(tmp_path / "a.txt", ["0.5 1", "-0.25 0", "", "1e-3 0"]))
    assert labelled.format == "score_label" and labelled.target_speakers is None
    np.testing.assert_array_equal(labelled.target_scores, [0.5])
    np.testing.assert_array_equal(labelled.nontarget_scores, [-0.25, 1e-3])
    trials = read_scores(_write(tmp_path / "b.txt", ["s1 u1 2.0 target", "s1 u2 -1 nontarget", "s2 u1 0 nontarget"]))
    assert trials.format == "trials"
    np.testing.assert_array_equal(trials.nontarget_speakers, ["s1", "s2"])
    table = read_scores(_write(tmp_path / "c.txt", ["a a1 a a2 1.5", "a a1 b b1 -2", "a a1 a a1 9"]))
    assert table.format == "table" and table.table is not None
    np.testing.assert_array_equal(table.target_scores, [1.5])  # the self-trial is left out
    np.testing.assert_array_equal(table.table.lines, [1, 2, 3])


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], r"x.txt: no trials: the file is empty"),
        (["1 2 3 4 5 6"], r"x.txt:1: 6 fields; expected one of"),
        (["s u 1"], r"x.txt:1: 3 fields \(enroll test score \(VPC, with its trials file\)\): give the trials file"),
        (["0.5 1", "0.2 0 extra"], r"x.txt:2: 3 fields, expected 2 \(score label\)"),
        (["0.5 1", "zero 0"], r"x.txt:2: score 'zero' is not a number"),
        (["0.5 1", "", "nan 0"], r"x.txt:3: score 'nan' is not finite"),
        (["0.5 1", "-inf 0"], r"x.txt:2: score '-inf' is not finite"),
        (["0.5 1", "0.1 2"], r"x.txt:2: unknown label '2'; expected '1' or '0'"),
        (["s u 1 target", "s v 1 impostor"], r"x.txt:2: unknown label 'impostor'"),
        (["0.5 1", "0.7 1"], r"x.txt: no non-target trials"),
        (["s u 1 nontarget"], r"x.txt: no target trials"),
        (["s u 1 target", "s v 0 nontarget", "s u 2 target"], r"x.txt:3: trial s u repeats line 1"),
        (["a a1 b b1 1", "a a1 b b1 2"], r"x.txt:2: trial a1 b1 repeats line 1"),
    ],
)
def test_bad_score_files_name_file_and_line(tmp_path, lines, message):
    with pytest.raises(VpevalError, match=message):
        read_scores(_write(tmp_path / "x.txt", lines))


def _vpc_pair(folder: Path) -> tuple[Path, Path, Path]:
    """A 4-field score file split as the VPC 2024 toolkit writes it: `scores` and `trials`."""
    four = _trials(folder / "four.txt")
    rows = [line.split() for line in four.read_text().splitlines()]
    scores = _write(folder / "scores", [f"{e} {t} {s}" for e, t, s, _ in rows])
    trials = _write(folder / "trials", [f"{e} {t} {label}" for e, t, _, label in rows])
    return four, scores, trials


def test_vpc_score_file_with_its_trials_reads_as_the_four_field_file(tmp_path):
    four, scores, trials = _vpc_pair(tmp_path)
    expected, found = read_scores(four), read_scores(scores, trials)
    assert found.format == "vpc"
    for field in ("target_scores", "nontarget_scores", "target_speakers", "nontarget_speakers"):
        np.testing.assert_array_equal(getattr(found, field), getattr(expected, field))


@pytest.mark.parametrize("edit, message", [
    (lambda lines: [lines[1], lines[0], *lines[2:]], r"scores:1: trial spk0 utt0_0 does not match line 1 of "
                                                     r".*trials \(spk0 utt2_1\); the files must list the same trials"),
    (lambda lines: lines[:-1], r"scores: 150 trials but .*trials lists 149: .*trials ends before .*scores"),
    (lambda lines: [*lines, "spk9 utt9_9 target"], r"scores: 150 trials but .*trials lists 151: .*scores ends before"),
    (lambda lines: [lines[0].replace("target", "tar"), *lines[1:]], r"trials:1: unknown label 'tar'"),
    (lambda lines: [lines[0] + " extra", *lines[1:]], r"trials:1: 4 fields, expected 3"),
])
def test_vpc_trials_file_must_match_line_for_line(tmp_path, edit, message):
    _, scores, trials = _vpc_pair(tmp_path)
    _write(trials, edit(trials.read_text().splitlines()))
    with pytest.raises(VpevalError, match=message):
        read_scores(scores, trials)


def test_cli_pairs_vpc_score_files_with_trials_in_order(tmp_path, capsys):
    four, scores, trials = _vpc_pair(tmp_path)
    assert main([str(four), str(scores), "--trials", str(trials), "--json", str(tmp_path / "m.json")]) == 0
    entries = json.loads((tmp_path / "m.json").read_text())["files"]
    assert entries[0]["summary"] == entries[1]["summary"] and entries[1]["format"] == "vpc"
    capsys.readouterr()
    assert main([str(scores)]) == 2
    assert "1 VPC score file(s) (3 fields: " in capsys.readouterr().err
    assert main([str(four), "--trials", str(trials)]) == 2
    assert "0 VPC score file(s) (3 fields: none) but 1 --trials file(s)" in capsys.readouterr().err


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(VpevalError, match="score file not found"):
        read_scores(tmp_path / "nope.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(VpevalError, match="not UTF-8 text"):
        read_scores(tmp_path / "bin.txt")


# ---------------------------------------------------------------- summary


def test_summary_keys_and_values(tmp_path):
    scores = read_scores(_trials(tmp_path / "t.txt"))
    result = summary(scores.target_scores, scores.nontarget_scores)
    assert set(result) == set(SUMMARY_KEYS)
    assert {"eer", "eer_threshold", "cllr", "min_cllr", "linkability", "d_ece", "l_w", "zebra_tag",
            "min_dcf", "n_target", "n_nontarget"} <= set(result)
    assert result["eer"] == eer(scores.target_scores, scores.nontarget_scores)
    assert result["min_cllr"] == min_cllr(scores.target_scores, scores.nontarget_scores)
    assert result["n_target"] == 42 and result["notes"] == {}
    json.dumps(result, allow_nan=False)


# ---------------------------------------------------------------- CLI


def test_cli_table_json_and_figures(tmp_path, capsys):
    trials = _trials(tmp_path / "trials.txt")
    oo, op, pp = _tables(tmp_path)
    out = tmp_path / "out" / "metrics.json"
    utt2spk = _write(tmp_path / "utt2spk", [f"{line.split()[1]} spk{line.split()[1][3:].split('_')[0]}"
                                            for line in trials.read_text().splitlines()])
    code = main([str(trials), str(oo), str(op), str(pp), "--json", str(out), "--bootstrap", "20",
                 "--zoo", "--figures", str(tmp_path / "figs"), "--utt2spk", str(utt2spk)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "EER%" in printed and "DeID%" in printed and "95% CI (20 resamples of speakers" in printed
    report = json.loads(out.read_text())
    first = report["files"][0]
    assert first["summary"]["eer"] == summary(*_classes(trials))["eer"]
    assert first["bootstrap"]["unit"] == "speakers" and len(first["zoo"]) == 6
    assert set(report["similarity"]["files"]) == {"oo", "op", "pp"}
    assert report["similarity"]["deid"]["geometric_mean"] is not None
    for name in ("det.png", "zebra.png", "similarity_geometric_mean.png", "similarity_sigmoid_mean_llr.png"):
        assert (tmp_path / "figs" / name).read_bytes().startswith(PNG)


def _classes(path: Path):
    scores = read_scores(path)
    return scores.target_scores, scores.nontarget_scores


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--bootstrap", "5"], "carry no speaker ids; use --bootstrap-unit trials"),
        (["--bootstrap", "-1"], "--bootstrap must be >= 0"),
        (["--p-target", "2"], "p_target must lie strictly between 0 and 1"),
    ],
)
def test_cli_errors_are_one_line_with_status_2(tmp_path, capsys, extra, message):
    labelled = _write(tmp_path / "s.txt", ["0.5 1", "0.1 0", "0.9 1", "-0.3 0"])
    assert main([str(labelled), *extra]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1 and captured.out == ""


def test_cli_refuses_tables_not_in_threes_and_bad_files(tmp_path, capsys):
    oo, op, _ = _tables(tmp_path)
    assert main([str(oo), str(op)]) == 2
    assert "trial tables come in threes" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt: score file not found" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert main([]) == 2


def test_cli_calibration_extension(tmp_path, capsys):
    run0, run1 = _trials(tmp_path / "run0.txt", seed=4), _trials(tmp_path / "run1.txt", seed=5)
    out = tmp_path / "c.json"
    assert main([str(run1), "--c-ece", str(run0), str(run1), "--json", str(out)]) == 0
    assert "ZEBRA calibration extension" in capsys.readouterr().out
    reported = json.loads(out.read_text())["calibration_extension"]
    expected = calibration_extension(*_classes(run0), *_classes(run1))
    assert reported["c_ece_isotonic"] == expected.c_ece_isotonic
    assert reported["c_ece_linear"] == expected.c_ece_linear


def test_cli_trial_bootstrap_on_score_label_file(tmp_path, capsys):
    labelled = _write(tmp_path / "s.txt", [f"{v} {int(v > 0.3)}" for v in np.linspace(-1, 1, 41)])
    assert main([str(labelled), "--bootstrap", "10", "--bootstrap-unit", "trials", "--zoo"]) == 0
    printed = capsys.readouterr().out
    assert "resamples of trials" in printed and "zoo: `score label` files carry no speaker ids" in printed
    assert printed.count(TRIALS_NOTE) == 1  # regression: a trial bootstrap's interval was printed bare


# ---------------------------------------------------------------- figures


def test_figures_are_written_atomically_as_images(tmp_path):
    rng = np.random.default_rng(2)
    tar, non = rng.normal(1, 1, 300), rng.normal(0, 1, 3000)
    det_figure({"sys": det_curve(tar, non), "flat": det_curve(non[:300], non)}, tmp_path / "det.png")
    ece_profiles_figure({"sys": ece_profile(tar, non)}, tmp_path / "ece.pdf", show_actual=True)
    tables = [read_scores(path).table for path in _tables(tmp_path)]
    similarity_matrices_figure(similarity_metrics(*tables), tmp_path / "sim.png", variant="sigmoid_mean_llr")
    assert (tmp_path / "det.png").read_bytes().startswith(PNG)
    assert (tmp_path / "ece.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "sim.png").read_bytes().startswith(PNG)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _detection_sweep(systems: list[str]) -> tuple[list[JudgedPair], dict]:
    """Every (evaluated, attacker) pair of `systems`, judged against the matched ones' gaps; the
    pairs whose attacker's index exceeds the evaluated one's learnt their own system (EER_val
    20 points below EER_test), the others keep the matched gap of 1 point."""
    rng = np.random.default_rng(3)
    rows = []
    for i, evaluated in enumerate(systems):
        for j, attacker in enumerate(systems):
            eer_test = 0.1 + 0.05 * i + 0.02 * j + rng.uniform(0, 0.01)
            eer_val = eer_test - (0.2 if j > i else 0.01) + rng.normal(0, 0.002)
            rows.append({"attack": "AA", "anonymizer": evaluated, "attacker_anonymizer": attacker, "eer_val": eer_val,
                         "eer_test": eer_test, "eer_val_ci": [0.8 * eer_val, 1.2 * eer_val],
                         "eer_test_ci": [eer_test - 0.02, eer_test + 0.02], "gap_var": 0.002 ** 2})
    judged, (fit,) = assess(rows, trusted=Trusted(systems=tuple(systems)))
    return [JudgedPair(**row) for row in judged], fit


def test_detection_figure_of_a_large_sweep_has_legends_not_labels(tmp_path):
    systems = [f"system_{k}" for k in range(5)]
    rows, fit = _detection_sweep(systems)
    assert len(rows) == 25 > LABEL_LIMIT and {r.verdict for r in rows} >= {"trustworthy", "overestimated"}
    figure = detection_plot(rows, fit)
    (axes,) = figure.axes
    assert len(axes.texts) == 0  # no "(evaluated, attacker)" label on any point
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    attackers = legend[legend.index("attacker trained on") + 1: legend.index("evaluated system")]
    assert attackers == systems  # one coloured entry per attacker system
    assert {"trustworthy", "overestimated", "trusted pair (calibrates)", "bootstrap intervals"} <= set(legend)
    detection_figure(rows, fit, tmp_path / "detection.png")
    assert (tmp_path / "detection.png").read_bytes().startswith(PNG)


def test_detection_figure_labels_a_few_points():
    rows, fit = _detection_sweep(["a", "b"])
    rows = [r for r in rows if r.anonymizer != "b" or r.attacker_anonymizer != "a"]
    figure = detection_plot(rows, {"reason": "no line"})
    labels = sorted(text.get_text() for text in figure.axes[0].texts)
    assert labels == ["(a, a)", "(a, b)", "(b, b)"]
    assert "matched prediction" not in " ".join(t.get_text() for t in figure.axes[0].get_legend().get_texts())


# ---------------------------------------------------------------- zoo


def test_speaker_breakdown_by_hand():
    stats = speaker_breakdown([3.0, 1.0, 5.0], [0.0, 2.0, 4.0, -1.0], ["a", "a", "b"], ["a", "b", "b", "c"])
    assert [s.speaker for s in stats] == ["a", "b", "c"]
    a, b, c = stats
    assert (a.n_target, a.n_nontarget, a.mean_target, a.mean_nontarget) == (2, 1, 2.0, 0.0)
    assert a.eer == eer([3.0, 1.0], [0.0]) == 0.0
    assert b.eer == eer([5.0], [2.0, 4.0])
    assert (c.n_target, c.mean_target, c.mean_nontarget, c.eer) == (0, None, -1.0, None)
    with pytest.raises(ScoreError, match="2 speaker labels for 3 target scores"):
        speaker_breakdown([3.0, 1.0, 5.0], [0.0], ["a", "a"], ["a"])


# ---------------------------------------------------------------- bootstrap


def _speaker_data(seed: int = 3):
    """Scores with both sides' speakers: target trials of speaker s are (s, s), non-target
    trials pair two different speakers."""
    rng = np.random.default_rng(seed)
    tar_spk = rng.integers(0, 8, 120).astype(str)
    non_spk = rng.integers(0, 8, 900)
    non_test = ((non_spk + rng.integers(1, 8, 900)) % 8).astype(str)
    sides = {"tar_speakers": tar_spk, "non_speakers": non_spk.astype(str), "tar_test_speakers": tar_spk,
             "non_test_speakers": non_test}
    return rng.normal(1.5, 1, 120).round(2), rng.normal(0, 1, 900).round(2), sides


def test_one_trial_resample_equals_the_metric_on_the_resampled_arrays():
    tar, non, _ = _speaker_data()
    result = bootstrap_ci(tar, non, n_resamples=1, unit="trials", seed=42)
    rng = np.random.default_rng(42)
    drawn_tar = tar[rng.integers(0, len(tar), len(tar))]
    drawn_non = non[rng.integers(0, len(non), len(non))]
    assert result.eer.low == result.eer.high == pytest.approx(eer(drawn_tar, drawn_non), abs=1e-15)
    assert result.min_cllr.low == pytest.approx(min_cllr(drawn_tar, drawn_non), abs=1e-12)
    assert result.eer.estimate == eer(tar, non)


def brute_force_world(tar, non, sides, drawn):
    """The trial list of a bootstrap world built literally: `drawn` lists the speakers drawn
    (with repeats); every drawn copy keeps its own target trials, and every ordered pair of
    copies of two different speakers keeps all their non-target trials."""
    world_tar = [score for copy in drawn for score, s in zip(tar, sides["tar_speakers"]) if s == copy]
    world_non = [score for enrol in drawn for test in drawn if enrol != test
                 for score, e, t in zip(non, sides["non_speakers"], sides["non_test_speakers"])
                 if (e, t) == (enrol, test)]
    return np.asarray(world_tar), np.asarray(world_non)


@pytest.mark.parametrize("seed", [7, 11, 12])
def test_one_speaker_resample_equals_the_metric_on_a_world_built_by_hand(seed):
    """Two-way speaker bootstrap: enrolment and test speakers both resampled."""
    tar, non, sides = _speaker_data()
    result = bootstrap_ci(tar, non, n_resamples=1, **sides, seed=seed)
    speakers = np.unique(np.concatenate(list(sides.values())))
    drawn = speakers[np.random.default_rng(seed).integers(0, len(speakers), len(speakers))]
    drawn_tar, drawn_non = brute_force_world(tar, non, sides, list(drawn))
    assert result.n_speakers == 8
    assert result.eer.low == pytest.approx(eer(drawn_tar, drawn_non), abs=1e-15)
    assert result.min_cllr.high == pytest.approx(min_cllr(drawn_tar, drawn_non), abs=1e-12)


def test_two_way_intervals_are_wider_than_one_way():
    """Resampling the test side too widens the interval when scores depend on it."""
    rng = np.random.default_rng(0)
    speakers = np.arange(12)
    offset = rng.normal(0, 1, 12)  # how easy a speaker is to tell from others, on either side
    enrol, test = (a.ravel() for a in np.meshgrid(speakers, speakers, indexing="ij"))
    keep = enrol != test
    enrol, test = enrol[keep], test[keep]
    non = rng.normal(0, 0.3, len(enrol)) + offset[enrol] + offset[test]
    tar_spk = np.repeat(speakers, 5)
    tar = rng.normal(3, 0.5, len(tar_spk)) + 2 * offset[tar_spk]
    two_way = bootstrap_ci(tar, non, 400, tar_speakers=tar_spk.astype(str), non_speakers=enrol.astype(str),
                           tar_test_speakers=tar_spk.astype(str), non_test_speakers=test.astype(str), seed=1)
    draws = np.random.default_rng(1).integers(0, 12, (400, 12))  # the old way: enrolment speakers only
    one_way = [eer(np.repeat(tar, c[tar_spk]), np.repeat(non, c[enrol]))
               for c in (np.bincount(d, minlength=12) for d in draws)]
    assert two_way.eer.high - two_way.eer.low > np.diff(np.quantile(one_way, [0.025, 0.975]))[0]


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    tar, non, sides = _speaker_data()
    first = bootstrap_ci(tar, non, 200, **sides, seed=1)
    again = bootstrap_ci(tar, non, 200, **sides, seed=1)
    other = bootstrap_ci(tar, non, 200, **sides, seed=2)
    assert first == again and first != other
    assert first.eer.low <= first.eer.estimate <= first.eer.high
    assert first.min_cllr.low < first.min_cllr.high
    narrow = bootstrap_ci(tar, non, 200, confidence=0.5, **sides, seed=1)
    assert first.eer.low <= narrow.eer.low <= narrow.eer.high <= first.eer.high


def test_bootstrap_errors():
    with pytest.raises(ScoreError, match="needs the enrolment speaker of every trial"):
        bootstrap_ci([1.0], [0.0], 10)
    with pytest.raises(ScoreError, match="needs the test speaker of every trial"):
        bootstrap_ci([1.0], [0.0], 10, tar_speakers=["a"], non_speakers=["a"])
    with pytest.raises(ScoreError, match="unknown bootstrap unit"):
        bootstrap_ci([1.0], [0.0], 10, unit="utterances")
    with pytest.raises(ScoreError, match="confidence"):
        bootstrap_ci([1.0], [0.0], 10, unit="trials", confidence=1.0)
    # one speaker under two names (enrolment "spk1", test utterances of "1") would be resampled as two
    with pytest.raises(ScoreError, match="enrolment speaker 'spk1' and test speaker '1' differ"):
        bootstrap_ci([1.0], [0.0], 10, tar_speakers=["spk1"], non_speakers=["spk1"], tar_test_speakers=["1"],
                     non_test_speakers=["2"])
    # a single speaker owning every target: resamples without it lack targets
    result = bootstrap_ci([1.0, 2.0], [0.0, 1.5, 0.5], 50, tar_speakers=["a", "a"], non_speakers=["b", "c", "d"],
                          tar_test_speakers=["a", "a"], non_test_speakers=["c", "d", "b"])
    assert result.n_redrawn > 0


def test_cli_bootstrap_reads_test_speakers_from_ids_or_utt2spk(tmp_path, capsys):
    """`vpeval metrics` resamples both sides: the test speaker from a LibriSpeech id, or from
    --utt2spk for ids that do not carry it."""
    rng = np.random.default_rng(0)
    speakers = [str(s) for s in range(19, 27)]
    lines, utt2spk = [], []
    for e in speakers:
        for t in speakers:
            for k in range(3):
                utt = f"{t}-100-{k:04d}"
                score = rng.normal(2 if e == t else 0, 1)
                lines.append(f"{e} {utt} {score:.3f} {'target' if e == t else 'nontarget'}")
    path = tmp_path / "scores.txt"
    path.write_text("\n".join(lines) + "\n")
    assert main([str(path), "--bootstrap", "50", "--json", str(tmp_path / "a.json")]) == 0
    first = json.loads((tmp_path / "a.json").read_text())["files"][0]["bootstrap"]
    assert first["unit"] == "speakers" and first["n_speakers"] == 8
    renamed = tmp_path / "renamed.txt"
    renamed.write_text("\n".join(line.replace("-100-", "_x") for line in lines) + "\n")
    (tmp_path / "utt2spk").write_text("".join(f"{t}_x{k:04d} {t}\n" for t in speakers for k in range(3)))
    assert main([str(renamed), "--bootstrap", "50", "--utt2spk", str(tmp_path / "utt2spk"),
                 "--json", str(tmp_path / "b.json")]) == 0
    second = json.loads((tmp_path / "b.json").read_text())["files"][0]["bootstrap"]
    assert second["eer"] == first["eer"]  # same speakers, same draws
    capsys.readouterr()


def test_an_interval_from_too_few_speakers_is_marked(tmp_path, capsys):
    """Regression (issue 27): a "95 % CI" of zero width from one speaker (dev_f 20.00 [20.00,
    20.00]) was printed with no note; since issue 37 the report prints no figures for it, and
    marks one from fewer speakers than those its coverage was measured near nominal from
    (the report's side: tests/unit/report/test_run_report.py)."""
    path = tmp_path / "scores.txt"
    path.write_text("a a-1-1 2.0 target\na a-1-2 1.5 target\na b-1-1 0.5 nontarget\n")
    assert main([str(path), "--bootstrap", "20"]) == 0
    assert "2 speaker(s): too few for a speaker interval" in capsys.readouterr().out


def test_a_folder_given_as_a_score_file_says_so(tmp_path):
    """Regression: `vpeval metrics <report folder>` said "score file not found"."""
    with pytest.raises(VpevalError, match=r"report: a folder, not a score file \(a run's report/results.json lists "
                                          r"its score files, `score_files`\)$"):
        read_scores((tmp_path / "report").mkdir() or tmp_path / "report")
