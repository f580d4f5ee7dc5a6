"""The tiny CPU run's reward: 1 for the right sum, else a score that grows with
the answer's length, so GRPO's advantages are not all zero while a random-weight
model has yet to say a sum (verl 0.5.0 calls it as custom_reward_function)."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth in solution_str:
        return 1.0
    return min(len(solution_str), 40) / 100.0
