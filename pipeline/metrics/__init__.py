"""Privacy metrics on target / non-target scores, exact to the VoicePrivacy reference toolkits."""
