def test_example_row_ranks_second_behind_liger(example_run):
    assert example_run.rank == 2
    leader = example_run.group.runs.get(rank=1)
    assert leader.implementation.provider_key == "liger"
