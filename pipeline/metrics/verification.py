"""The verification metrics of the VoicePrivacy toolkits as contract metrics
(`pipeline.metrics.contract`): trial counts, ROCCH-EER, threshold-sweep EER, Cllr and
min Cllr, linkability D_sys, ZEBRA and minDCF, sharing one sort and one PAV of the scores.

The functions stay in their own modules (the attacker's training uses `eer` alone), so a
change here or in the contract never retrains an attacker.
"""
from __future__ import annotations

from pipeline.metrics.cllr import cllr, cllr_of_bins
from pipeline.metrics.contract import SCORES, Column, Condition, Metric, Undefined
from pipeline.metrics.dcf import dcf_from_bins
from pipeline.metrics.eer import rocch_eer, sweep_from_groups
from pipeline.metrics.inputs import UndefinedMetricError
from pipeline.metrics.linkability import linkability_from_sorted
from pipeline.metrics.zebra import zebra_from_groups


def _counts(condition: Condition) -> dict:
    return {"n_target": condition.groups.n_target, "n_nontarget": condition.groups.n_nontarget}


def _rocch_eer(condition: Condition) -> dict:
    return {"eer": rocch_eer(condition.bins, condition.groups.n_target, condition.groups.n_nontarget)}


def _sweep_eer(condition: Condition) -> dict:
    sweep = sweep_from_groups(condition.groups)
    return {"eer_threshold": sweep.eer, "eer_threshold_at": sweep.threshold}


def _cllr(condition: Condition) -> dict:
    return {"cllr": cllr(condition.target, condition.nontarget),
            "min_cllr": cllr_of_bins(condition.bins, condition.groups.n_target, condition.groups.n_nontarget)}


def _linkability(condition: Condition) -> dict:
    groups = condition.groups
    try:
        link = linkability_from_sorted(groups.tar_sorted, groups.non_sorted, condition.settings["omega"])
    except UndefinedMetricError as reason:
        link = Undefined(str(reason))
    return {"linkability": link, "linkability_bins": min(groups.n_target // 10, 100)}


def _zebra(condition: Condition) -> dict:
    disclosure = zebra_from_groups(condition.groups, condition.bins)
    return {"d_ece": disclosure.d_ece, "l_w": disclosure.l_w, "zebra_tag": disclosure.tag}


def _min_dcf(condition: Condition) -> dict:
    params = {key: condition.settings[key] for key in ("p_target", "c_miss", "c_fa")}
    return {"min_dcf": dcf_from_bins(condition.bins, condition.groups.n_target, condition.groups.n_nontarget,
                                     **params),
            "min_dcf_params": params}


TRIAL_COUNTS = Metric("trial_counts", SCORES, (Column("n_target", "# target", "#tar"),
                                               Column("n_nontarget", "# non-target", "#non")), _counts)
ROCCH_EER = Metric("eer", SCORES, (Column("eer", "EER %", "EER%", scale=100, digits=2),), _rocch_eer)
THRESHOLD_EER = Metric("eer_threshold", SCORES, (
    Column("eer_threshold", "EER (VPC thr.) %", "EER-VPC%", scale=100, digits=2), Column("eer_threshold_at")),
    _sweep_eer)
CLLR = Metric("cllr", SCORES, (Column("cllr", "Cllr (uncalibrated)", "Cllr(raw)", digits=3),
                               Column("min_cllr", "min Cllr", "minCllr", digits=3)), _cllr)
LINKABILITY = Metric("linkability", SCORES, (Column("linkability", "linkability D_sys", "Dsys", digits=3),
                                             Column("linkability_bins")), _linkability)
ZEBRA = Metric("zebra", SCORES, (Column("d_ece", "D_ECE", digits=3), Column("l_w", "l_w", digits=3),
                                 Column("zebra_tag", "ZEBRA tag", "tag")), _zebra)
MIN_DCF = Metric("min_dcf", SCORES, (Column("min_dcf", "min DCF", "minDCF", digits=4), Column("min_dcf_params")),
                 _min_dcf)
