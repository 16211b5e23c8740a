"""Failed writes end in one line naming the file and the system's reason (pipeline.core.fileio)."""
import errno
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pipeline.core.errors import WriteError
from pipeline.core.fileio import atomic_path, library_write_cause
from pipeline.data.audio import write_audio


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_real_libsndfile_failure_names_the_file(tmp_path):
    """libsndfile itself fails (its temporary is /dev/full, where every write gets ENOSPC): its
    "System error." comes back as a WriteError naming the file, with no partial file left."""
    (tmp_path / f".a.tmp{os.getpid()}.wav").symlink_to("/dev/full")  # the temporary atomic_path writes
    with pytest.raises(WriteError) as caught:
        write_audio(tmp_path / "a.wav", np.zeros(1600), 16000)
    assert str(caught.value).startswith(f"{tmp_path / 'a.wav'}: cannot write (libsndfile: System error.); check")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag, bavail, access, expected", [
    (os.ST_RDONLY, 100, True, errno.EROFS),
    (0, 100, False, errno.EACCES),
    (0, 0, True, errno.ENOSPC),
])
def test_the_cause_of_a_libsndfile_system_error_is_read_from_the_folder(tmp_path, monkeypatch, flag, bavail, access,
                                                                        expected):
    disk = os.statvfs(tmp_path)
    monkeypatch.setattr(os, "statvfs", lambda path: os.statvfs_result((*disk[:4], bavail * (1 << 20), *disk[5:8], flag,
                                                                       disk[9])))
    monkeypatch.setattr(os, "access", lambda path, mode: access)
    assert library_write_cause(sf.LibsndfileError(2), tmp_path).errno == expected


def test_other_errors_of_a_writer_stay_what_they_are(tmp_path):
    """A libsndfile error that is not a system error (a bad format: a bug), or any other
    exception, is raised as it was, not dressed up as a disk problem."""
    for error in (sf.LibsndfileError(1), ValueError("bad value")):
        with pytest.raises(type(error)), atomic_path(tmp_path / "a.wav"):
            raise error
    assert list(tmp_path.iterdir()) == []
