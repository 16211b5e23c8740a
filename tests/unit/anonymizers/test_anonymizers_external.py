"""External command and precomputed folder: the user's audio comes in checked, and every
bad case stops with one line naming the utterances."""
import sys
import textwrap

import numpy as np
import pytest
import soundfile as sf
import torch

from anonymizers.external import External
from anonymizers.precomputed import Precomputed, PrecomputedParameters
from pipeline.core.errors import VpevalError

RATE = 16000
IDS = ["spk1-a", "spk1-b", "spk2-a"]
SPEAKERS = ["spk1", "spk1", "spk2"]

# A stand-in for a user's system: halves every input, with switches for the failure modes.
FAKE_SYSTEM = textwrap.dedent("""
    import sys, time
    import numpy as np, soundfile as sf
    list_file, output_dir, rate, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if mode == "fail":
        print("loading model"); print("CUDA out of memory", file=sys.stderr); sys.exit(3)
    if mode == "sleep":
        time.sleep(60)
    for number, line in enumerate(open(list_file)):
        utt, speaker, path = line.split()
        audio, _ = sf.read(path, dtype="float32")
        if mode == "skip" and number == 1:
            continue
        if mode == "short":
            audio = audio[: len(audio) // 2]
        if mode == "rate":
            rate = 8000
        sf.write(f"{output_dir}/{utt}.wav", 0.5 * audio, rate)
""")


@pytest.fixture
def fake_system(tmp_path):
    script = tmp_path / "fake_system.py"
    script.write_text(FAKE_SYSTEM)
    return script


def inputs():
    rng = np.random.default_rng(0)
    return [0.3 * rng.uniform(-1, 1, n).astype(np.float32) for n in (8000, 12000, 4000)]


def external(script, mode, **options):
    command = [sys.executable, str(script), "{list_file}", "{output_dir}", "{sample_rate}", mode]
    return External(command=command, device="cpu", **options)


def test_external_command_output_is_returned_in_order(fake_system):
    waves = inputs()
    outputs = external(fake_system, "ok")(waves, IDS, SPEAKERS, RATE)
    for wave, output in zip(waves, outputs):
        expected = 0.5 * np.round(wave * 32767) / 32767  # through 16-bit PCM files
        assert output.dtype == torch.float32
        np.testing.assert_allclose(output.numpy(), expected, atol=2 / 32768)


def test_placeholders_are_filled(tmp_path):
    anonymizer = External(command=["prog", "--in={input_dir}", "{seed}", "{level}", "{x"], seed=7, level="speaker",
                          device="cpu")
    argv = anonymizer.argv({"input_dir": "/in", "list_file": "", "output_dir": "", "sample_rate": "16000",
                            "seed": "7", "level": "speaker"})
    assert argv == ["prog", "--in=/in", "7", "speaker", "{x"]


@pytest.mark.parametrize("mode, message", [
    ("fail", r"failed with exit status 3: CUDA out of memory"),
    ("skip", r"missing for 1 utterance\(s\): spk1-b$"),
    ("short", r"length off by more than 10% \+ 0.05 s for 3 utterance\(s\): spk1-a \(0.25 s for 0.50 s\)"),
    ("rate", r"sample rate not 16000 Hz for 3 utterance\(s\): spk1-a \(8000 Hz\), spk1-b \(8000 Hz\)"),
])
def test_external_failures_name_the_problem(fake_system, mode, message):
    with pytest.raises(VpevalError, match=message):
        external(fake_system, mode)(inputs(), IDS, SPEAKERS, RATE)


def test_external_timeout_kills_the_command(fake_system):
    with pytest.raises(VpevalError, match=r"timed out after 1 s"):
        external(fake_system, "sleep", timeout_seconds=1)(inputs(), IDS, SPEAKERS, RATE)


def test_external_command_not_found():
    anonymizer = External(command=["/nonexistent/anonymize-me", "{input_dir}"], device="cpu")
    with pytest.raises(VpevalError, match=r"program '/nonexistent/anonymize-me' not found"):
        anonymizer(inputs(), IDS, SPEAKERS, RATE)


@pytest.mark.parametrize("command, message", [
    ("python run.py {input_dir}", "argv list"),
    ([], "argv list"),
    (["prog", "{inputdir}"], r"unknown placeholder\(s\) \['inputdir'\]"),
])
def test_external_bad_command_is_a_config_error(command, message):
    with pytest.raises(VpevalError, match=message):
        External(command=command, device="cpu")


def test_external_refuses_ids_that_are_not_file_names(fake_system):
    with pytest.raises(VpevalError, match="unusable as file names"):
        external(fake_system, "ok")(inputs()[:1], ["../evil"], ["s"], RATE)


def write_precomputed(folder, waves, ids, rate=RATE):
    for wave, utt in zip(waves, ids):
        speaker = utt.split("-")[0]
        path = folder / speaker / f"{utt}.flac"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, wave, rate)


def test_precomputed_finds_files_anywhere_under_the_folder(tmp_path):
    waves = inputs()
    write_precomputed(tmp_path, [0.5 * w for w in waves], IDS)
    outputs = Precomputed(folder=str(tmp_path), device="cpu")(waves, IDS, SPEAKERS, RATE)
    for wave, output in zip(waves, outputs):
        np.testing.assert_allclose(output.numpy(), 0.5 * wave, atol=2 / 32768)


def test_precomputed_audio_changed_in_place_without_suffix_is_not_taken_for_the_old(tmp_path):
    """Regression (review of issue 39): without `suffix` the fingerprint was empty, so audio
    re-anonymised at the same folder was served from the cache."""
    waves = inputs()
    write_precomputed(tmp_path, [0.5 * w for w in waves], IDS)
    before = PrecomputedParameters(folder=str(tmp_path)).fingerprint(None)
    write_precomputed(tmp_path, [0.25 * w for w in waves[:1]], IDS[:1])
    after = PrecomputedParameters(folder=str(tmp_path)).fingerprint(None)
    assert before["precomputed_dirs"] and after != before


def test_precomputed_uses_wav_scp_when_present(tmp_path):
    """The wav.scp starts with a byte-order mark, which is not part of the first utterance id."""
    waves = inputs()
    write_precomputed(tmp_path / "audio", waves, ["x1", "x2", "x3"])
    lines = "".join(f"{utt} audio/{x}/{x}.flac\n" for utt, x in zip(IDS, ["x1", "x2", "x3"]))
    (tmp_path / "wav.scp").write_text("\ufeff" + lines, encoding="utf-8")
    outputs = Precomputed(folder=str(tmp_path), device="cpu")(waves, IDS, SPEAKERS, RATE)
    np.testing.assert_allclose(outputs[0].numpy(), waves[0], atol=2 / 32768)
    np.testing.assert_allclose(outputs[2].numpy(), waves[2], atol=2 / 32768)


def test_precomputed_missing_ids_are_named(tmp_path):
    write_precomputed(tmp_path, inputs()[:1], IDS[:1])
    with pytest.raises(VpevalError, match=r"precomputed folder .*: missing for 2 utterance\(s\): spk1-b, spk2-a"):
        Precomputed(folder=str(tmp_path), device="cpu")(inputs(), IDS, SPEAKERS, RATE)


def test_precomputed_wrong_rate_and_undecodable_files_are_named(tmp_path):
    waves = inputs()
    write_precomputed(tmp_path, waves[:2], IDS[:2], rate=22050)
    (tmp_path / "spk2").mkdir()
    (tmp_path / "spk2" / "spk2-a.wav").write_bytes(b"not audio at all")
    with pytest.raises(VpevalError, match=r"sample rate not 16000 Hz for 2 utterance.*not decodable audio for 1 "
                                          r"utterance\(s\): spk2-a"):
        Precomputed(folder=str(tmp_path), device="cpu")(waves, IDS, SPEAKERS, RATE)


def test_precomputed_non_finite_output_is_named(tmp_path):
    """Regression: the reader's own non-finite check made this report 'not decodable audio'."""
    waves = inputs()
    write_precomputed(tmp_path, waves, IDS)
    broken = waves[1].copy()
    broken[10] = np.nan
    (tmp_path / "spk1" / "spk1-b.flac").unlink()
    sf.write(tmp_path / "spk1" / "spk1-b.wav", broken, RATE, subtype="FLOAT")
    with pytest.raises(VpevalError, match=r"non-finite samples for 1 utterance\(s\): spk1-b"):
        Precomputed(folder=str(tmp_path), device="cpu")(waves, IDS, SPEAKERS, RATE)


def test_precomputed_duplicate_ids_are_an_error(tmp_path):
    write_precomputed(tmp_path, inputs()[:1], IDS[:1])
    sf.write(tmp_path / "spk1-a.wav", inputs()[0], RATE)
    with pytest.raises(VpevalError, match="several files for utterance"):
        Precomputed(folder=str(tmp_path), device="cpu")(inputs()[:1], IDS[:1], SPEAKERS[:1], RATE)


def test_precomputed_bad_wav_scp_line_is_named(tmp_path):
    (tmp_path / "wav.scp").write_text("u1 a.wav\nu2 sox b.flac -t wav - |\n")
    with pytest.raises(VpevalError, match=r"wav.scp:2: piped command"):
        Precomputed(folder=str(tmp_path), device="cpu")(inputs()[:1], ["u1"], ["s"], RATE)


def test_precomputed_folder_must_exist(tmp_path):
    with pytest.raises(VpevalError, match="anonymizer.folder"):
        Precomputed(folder=str(tmp_path / "nope"), device="cpu")


def test_the_command_is_told_which_list_it_anonymises(tmp_path):
    """At speaker level a speaker needs a different pseudo-speaker in each list: the command
    gets the list's name."""
    told = tmp_path / "list_name.txt"
    command = [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2]); sys.exit(1)",
               str(told), "{list_name}"]
    with pytest.raises(VpevalError, match="exit status 1"):
        External(command=command, level="speaker", device="cpu")(inputs(), IDS, SPEAKERS, RATE, "dev_enrolls")
    assert told.read_text() == "dev_enrolls"
