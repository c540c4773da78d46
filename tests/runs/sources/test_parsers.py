"""Every quirk of the shipped Liger files, one test each."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runs.sources.parsers import IngestError, parse_liger_csv

HEADER = (
    "kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,"
    "x_value,y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp,"
    "liger_version"
)
ROPE = (
    "llama4_rope,huggingface,forward,speed,ms,T,sequence length,4096,0.38553598523139954,"
    '0.3846847891807556,0.38624000549316406,"{""dtype"": ""torch.bfloat16"", ""hidden_size"": 8192, '
    '""num_q_heads"": 32, ""num_kv_heads"": 8}",NVIDIA H100 80GB HBM3,2025-08-07 21:42:12,0.6.1'
)


def csv_bytes(*rows: str, eol: str = "\r\n") -> bytes:
    return (eol.join([HEADER, *rows]) + eol).encode()


def test_crlf_and_lf_give_the_same_rows():
    crlf = parse_liger_csv(csv_bytes(ROPE), "a.csv")
    lf = parse_liger_csv(csv_bytes(ROPE, eol="\n"), "a.csv")
    assert [r.__dict__ for r in crlf] == [r.__dict__ for r in lf]
    assert crlf[0].line == 2


def test_json_cell_becomes_normalised_parameters():
    (row,) = parse_liger_csv(csv_bytes(ROPE), "a.csv")
    assert row.params == {
        "dtype": "bf16",
        "hidden": 8192,
        "q_heads": 32,
        "kv_heads": 8,
        "seq": 4096,
    }
    assert row.sweep_name == "seq"
    assert row.sweep_value == 4096


def test_latency_is_integer_nanoseconds_and_source_numbers_stay_verbatim():
    (row,) = parse_liger_csv(csv_bytes(ROPE), "a.csv")
    assert (row.median, row.p20, row.p80) == (385536, 384685, 386240)
    assert row.source_metrics == {
        "ms_20": 0.3846847891807556,
        "ms_50": 0.38553598523139954,
        "ms_80": 0.38624000549316406,
    }


def test_memory_mb_are_mebibytes():
    line = (
        "llama4_rope,liger,full,memory,MB,H,hidden size,512,37.23486328125,37.23486328125,"
        '37.23486328125,"{""dtype"": ""torch.bfloat16"", ""seq_len"": 2048, ""num_q_heads"": 32, '
        '""num_kv_heads"": 8}",NVIDIA H100 80GB HBM3,2025-08-07 21:42:08,0.6.1'
    )
    (row,) = parse_liger_csv(csv_bytes(line), "a.csv")
    assert row.metric == "memory" and row.unit == "B"
    assert row.median == 39043584 == int(37.23486328125 * 2**20)
    assert row.source_metrics["mb_50"] == 37.23486328125


def test_nulls_inside_the_config_are_dropped_and_the_sweep_stands_in():
    line = (
        "fused_moe,liger,forward,speed,ms,T,num_tokens,512,1.5,1.4,1.6,"
        '"{""T"": null, ""E"": 8, ""dtype"": ""torch.bfloat16""}",NVIDIA H100 80GB HBM3,'
        "2025-08-07 21:42:08,0.6.1"
    )
    (row,) = parse_liger_csv(csv_bytes(line), "a.csv")
    assert row.params == {"E": 8, "dtype": "bf16", "seq": 512}


def test_string_and_float_x_values_agree_with_integers():
    as_float = ROPE.replace(",4096,0.385", ",4096.0,0.385")
    as_string = ROPE.replace(",4096,0.385", ',"4096",0.385')
    rows = [parse_liger_csv(csv_bytes(v), "a.csv")[0] for v in (ROPE, as_float, as_string)]
    assert {r.params["seq"] for r in rows} == {4096}
    assert all(isinstance(r.params["seq"], int) for r in rows)
    text_x = ROPE.replace(",4096,0.385", ",gelu,0.385")
    (row,) = parse_liger_csv(csv_bytes(text_x), "a.csv")
    assert row.params["seq"] == "gelu" and row.sweep_value is None


def test_provider_spellings_are_normalised_but_kept_verbatim():
    line = ROPE.replace("huggingface", "Liger-FP32-Accum")
    (row,) = parse_liger_csv(csv_bytes(line), "a.csv")
    assert row.provider == "liger_fp32_accum"
    assert row.raw_provider == "Liger-FP32-Accum"


def test_local_timestamp_without_zone_is_read_as_utc():
    (row,) = parse_liger_csv(csv_bytes(ROPE), "a.csv")
    assert row.observed_at == datetime(2025, 8, 7, 21, 42, 12, tzinfo=UTC)


def test_no_grad_forward_is_a_pass_of_its_own():
    (row,) = parse_liger_csv(csv_bytes(ROPE.replace(",forward,", ",no-grad-forward,")), "a.csv")
    assert row.timed_pass == "no-grad-forward"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (ROPE.replace("0.38553598523139954", "fast"), "y_value_50 is not a number"),
        (ROPE.replace('"{""dtype', '"{dtype'), "is not JSON"),
        (ROPE.replace("2025-08-07 21:42:12", "yesterday"), "is not YYYY-MM-DD"),
        (ROPE.replace(",forward,", ",sideways,"), "unknown operation mode"),
        (ROPE.replace(",speed,ms,", ",speed,s,"), "unit 's'"),
        (ROPE.rsplit(",", 1)[0], "expected 15 cells, found 14"),
        (ROPE.replace("0.38553598523139954", "nan"), "not finite"),
    ],
)
def test_malformed_rows_are_reported_with_their_line(bad, message):
    with pytest.raises(IngestError) as excinfo:
        parse_liger_csv(csv_bytes(ROPE, bad, ROPE.replace("4096", "8192")), "upstream.csv")
    assert excinfo.value.problems[0][0] == 3
    assert message in excinfo.value.problems[0][1]
    assert str(excinfo.value).startswith("upstream.csv: line 3:")


def test_wrong_header_and_empty_file():
    with pytest.raises(IngestError, match="unexpected header"):
        parse_liger_csv(b"a,b,c\r\n1,2,3\r\n", "x.csv")
    with pytest.raises(IngestError, match="empty file"):
        parse_liger_csv(b"", "x.csv")


def test_quoted_cell_spanning_lines_keeps_line_numbers_right():
    multi = ROPE.replace('""num_q_heads"": 32, ', '\n""num_q_heads"": 32, ')
    bad = ROPE.replace("0.38553598523139954", "x")
    with pytest.raises(IngestError) as excinfo:
        parse_liger_csv(csv_bytes(multi, bad), "a.csv")
    assert excinfo.value.problems == [(4, "y_value_50 is not a number: 'x'")]
