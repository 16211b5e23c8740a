"""Bad inputs: audio files (and the clean folder they damage, which validates)."""
import numpy as np
import soundfile as sf

from pipeline.core.cache import Cache
from pipeline.stages import validate
from tests.faults.bad_inputs.catalogue import RATE, SECONDS, point_audio, raised, record, validation_error
from tests.helpers import tone


def test_clean_prepared_folder_validates(prepared):
    validate.run(prepared, Cache(prepared.parent / "cache"), ("test",))


def test_corrupt_audio(prepared, tmp_path):
    path = tmp_path / "corrupt.flac"
    good = (tmp_path / "audio" / "e1-tri.flac").read_bytes()
    path.write_bytes(good[:64] + bytes(np.random.default_rng(0).integers(0, 256, len(good) - 64, dtype=np.uint8)))
    point_audio(prepared, "e1-tri", path)
    record("corrupt", "corrupt audio file (valid FLAC header, garbage frames)", "validate (decodes every file)",
           validation_error(prepared), tmp_path, "corrupt.flac", "e1-tri")


def test_empty_audio(prepared, tmp_path):
    path = tmp_path / "empty.wav"
    sf.write(path, np.zeros(0, dtype=np.float32), RATE)
    point_audio(prepared, "e1-tri", path)
    record("empty", "empty audio file (0 samples)", "validate", validation_error(prepared), tmp_path,
           "empty.wav", "0 samples")


def test_stereo_audio(prepared, tmp_path):
    path = tmp_path / "stereo.flac"
    sf.write(path, np.stack([tone(SECONDS, 120)] * 2, axis=1), RATE)
    point_audio(prepared, "e1-tri", path)
    record("stereo", "stereo audio file", "validate", validation_error(prepared), tmp_path,
           "stereo.flac", "2 channels")


def test_wrong_rate_audio(prepared, tmp_path):
    path = tmp_path / "narrowband.flac"
    sf.write(path, tone(SECONDS, 120, rate=8000), 8000)
    point_audio(prepared, "e1-tri", path, sample_rate=8000)
    record("wrong-rate", "audio at 8 kHz where the corpus is 16 kHz", "validate", validation_error(prepared),
           tmp_path, "e1-tri", "8000 Hz")


def test_header_rate_disagrees_with_manifest(prepared, tmp_path):
    path = tmp_path / "resampled.flac"
    sf.write(path, tone(SECONDS, 120, rate=22050), 22050)
    point_audio(prepared, "e1-tri", path)
    record("rate-mismatch", "audio whose header rate differs from its manifest entry", "validate",
           validation_error(prepared), tmp_path, "resampled.flac", "22050 Hz")


def test_truncated_audio(prepared, tmp_path):
    path = tmp_path / "truncated.wav"
    sf.write(path, tone(SECONDS, 120), RATE, subtype="PCM_16")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # the header still promises the full length
    point_audio(prepared, "e1-tri", path)
    record("truncated", "truncated audio file (header promises more samples)", "validate",
           validation_error(prepared), tmp_path, "truncated.wav")


def test_non_finite_audio(prepared, tmp_path):
    path = tmp_path / "diverged.wav"
    samples = tone(SECONDS, 120).astype(np.float32)
    samples[100] = np.nan
    sf.write(path, samples, RATE, subtype="FLOAT")
    point_audio(prepared, "e1-tri", path)
    record("non-finite", "float audio file with a NaN sample", "validate", validation_error(prepared), tmp_path,
           "diverged.wav", "non-finite", "sample 100")


def test_non_finite_audio_read_directly(tmp_path):
    """Stages that read audio without validation (and the library API) refuse it too."""
    from pipeline.data.audio import read_audio

    path = tmp_path / "loud.wav"
    samples = tone(SECONDS, 120).astype(np.float32)
    samples[7] = np.inf
    sf.write(path, samples, RATE, subtype="FLOAT")
    record("non-finite-read", "float audio file with an infinite sample, read by a stage", "any stage (audio reader)",
           raised(read_audio, path), tmp_path, "loud.wav", "sample 7")


def test_non_audio_file(prepared, tmp_path):
    path = tmp_path / "transcript.flac"
    path.write_text("THIS IS A TRANSCRIPT NOT AUDIO\n")
    point_audio(prepared, "e1-tri", path)
    record("non-audio", "a text file where audio is expected", "validate", validation_error(prepared), tmp_path,
           "transcript.flac", "cannot decode")


def test_missing_audio_file(prepared, tmp_path):
    point_audio(prepared, "e1-tri", tmp_path / "nowhere" / "e1-tri.flac")
    record("missing-audio", "manifest entry whose audio file does not exist", "validate",
           validation_error(prepared), tmp_path, "e1-tri.flac", "missing")
