"""Recognisers of the utility evaluation: speech recognition (`asr`) and emotion recognition
(`emotion`), loaded from local folders."""
