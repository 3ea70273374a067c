"""Known answers for the advice (issue 29): kernels with one planted defect each and their hand
fixes, run and checked against what the advice says (known_answers.json and .txt)."""
