"""The signal layer: F0 (YIN), LPC and root finding, source-filter synthesis. Plain numpy /
torch signal processing that knows nothing of corpora, attackers or stages."""
