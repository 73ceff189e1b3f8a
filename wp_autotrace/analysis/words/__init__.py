"""The ground of analysis: words for figures and sentences (sizes, pids, sites, the Answer); imports no other stage."""
