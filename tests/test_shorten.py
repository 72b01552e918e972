"""The shortened forms and markers (SPEC 3, 4, 6, 7), exact to the char."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkeep.shorten import (
    CCR_MARKER_RE,
    SAVED_PATH_RE,
    archive_key,
    cap_form,
    carried_keys,
    cleared_form,
    compact_form,
    format_size,
    line_count,
    marker,
    preview_form,
    split_preview,
    summary_form,
)

from .strategies import property_settings

K1, K2 = "0123456789abcdef", "fedcba9876543210"


class TestKeysAndMarkers:
    def test_archive_key_is_sha256_prefix_of_utf8(self) -> None:
        """The key is the first 16 hex digits of the SHA-256 of the UTF-8 bytes."""
        text = "héllo 🙂"
        assert archive_key(text) == hashlib.sha256(text.encode()).hexdigest()[:16]

    def test_archive_key_accepts_lone_surrogates(self) -> None:
        """A str decoded from JSON may hold a lone surrogate; it still has a key."""
        assert len(archive_key("a\ud800b")) == 16

    def test_marker_shape(self) -> None:
        """The marker is ``<<ccr:KEY>>`` and the regex finds its key."""
        assert marker(K1) == "<<ccr:0123456789abcdef>>"
        assert CCR_MARKER_RE.findall(f"x {marker(K1)} y") == [K1]

    def test_carried_keys_in_order_once(self) -> None:
        """Keys already in a text, in order of appearance, each once; malformed ones ignored."""
        text = f"{marker(K2)} a {marker(K1)} b {marker(K2)} <<ccr:XYZ>> <<ccr:0123>>"
        assert carried_keys(text) == [K2, K1]

    def test_saved_path_regex(self) -> None:
        """The saved-path regex finds the path of a preview."""
        p = preview_form("a" * 100, 10, 10, keys=[], path="/w/tool-results/budget_x_1.txt")
        assert SAVED_PATH_RE.findall(p) == ["/w/tool-results/budget_x_1.txt"]


class TestSizes:
    @pytest.mark.parametrize(
        ("n", "shown"),
        [
            (0, "0"),
            (999, "999"),
            (1_000, "1K"),
            (1_234, "1.2K"),
            (3_001, "3K"),
            (28_000, "28K"),
            (28_499, "28K"),
            (28_500, "28K") if f"{28.5:.0f}" == "28" else (28_500, "29K"),
            (999_499, "999K"),
            (999_500, "1M"),
            (1_200_000, "1.2M"),
            (12_345_678, "12M"),
        ],
    )
    def test_format_size(self, n: int, shown: str) -> None:
        """Sizes in K and M as in ``28K``, ``1.2M``; below 1,000 the plain number."""
        assert format_size(n) == shown

    @pytest.mark.parametrize(("text", "n"), [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)])
    def test_line_count(self, text: str, n: int) -> None:
        """Lines are line breaks plus one for an unterminated last line."""
        assert line_count(text) == n


class TestForms:
    def test_cap_form(self) -> None:
        """``HEAD\\n\\n[TRUNCATED N chars omitted, M kept] [full output saved to P] <<ccr:K>>\\n\\nTAIL``."""
        text = "H" * 5 + "m" * 7 + "T" * 3
        assert cap_form(text, 5, 3, keys=[K1], path="/p") == (
            "HHHHH\n\n[TRUNCATED 7 chars omitted, 8 kept] [full output saved to /p] <<ccr:0123456789abcdef>>\n\nTTT"
        )

    def test_preview_form_with_thousands(self) -> None:
        """The preview's N has thousands separators and the line names the saved file."""
        text = "a" * 90_432
        p = preview_form(text, 4_000, 1_000, keys=[K1], path="/w/f.txt")
        assert p == (
            "a" * 4_000
            + "\n\n... [85,432 chars omitted -- full output saved to /w/f.txt] <<ccr:0123456789abcdef>>\n\n"
            + "a" * 1_000
        )

    def test_preview_form_when_save_failed(self) -> None:
        """Without a path the preview gives the reason instead of a file name."""
        p = preview_form("a" * 50, 10, 10, keys=[], path=None, save_error="No space left on device")
        assert (
            p
            == "a" * 10
            + "\n\n... [30 chars omitted -- full output could not be saved: No space left on device]\n\n"
            + "a" * 10
        )

    def test_compact_form(self) -> None:
        """``HEAD\\n[... N chars omitted from old tool result ...] <<ccr:K>>\\nTAIL``, paths before keys."""
        text = "H" * 4 + "m" * 6 + "T" * 2
        assert compact_form(text, 4, 2, keys=[K1], paths=["/p"]) == (
            "HHHH\n[... 6 chars omitted from old tool result ...] [full output saved to /p] <<ccr:0123456789abcdef>>\nTT"
        )

    def test_summary_form_matches_spec_example(self) -> None:
        """450 lines of Go, 28K chars: the SPEC's own example line."""
        text = ("x" * 61 + "\n") * 450  # 27,900 chars
        assert (
            summary_form(text, "Go source", keys=[])
            == "[Old tool result cleared -- 450 lines, 28K chars, Go source]"
        )
        assert summary_form(text, "Go source", keys=[K1]) == (
            "[Old tool result cleared -- 450 lines, 28K chars, Go source] <<ccr:0123456789abcdef>>"
        )

    def test_cleared_form(self) -> None:
        """``[result cleared] <<ccr:K>>``: the markers, each once; the saved path only without one."""
        assert cleared_form(keys=[K1, K2, K1], paths=["/p"]) == f"[result cleared] {marker(K1)} {marker(K2)}"
        assert cleared_form(keys=[], paths=["/p"]) == "[result cleared] [full output saved to /p]"
        assert cleared_form(keys=[]) == "[result cleared]"

    def test_markers_never_duplicated(self) -> None:
        """A key or path already in the kept text is not added again; repeated keys appear once."""
        text = f"{marker(K1)} head " + "m" * 100 + " tail"
        out = compact_form(text, 30, 5, keys=[K1, K2, K2], paths=["/p", "/p"])
        assert out.count(marker(K1)) == 1 and out.count(marker(K2)) == 1 and out.count("/p") == 1
        summary = summary_form(text, "text", keys=[K2, K1, K2], paths=["/p"])
        assert summary.endswith(f"[full output saved to /p] {marker(K2)} {marker(K1)}")

    def test_zero_tail(self) -> None:
        """A tail of 0 keeps no tail at all (not the whole text)."""
        assert cap_form("abcdef", 2, 0, keys=[]) == "ab\n\n[TRUNCATED 4 chars omitted, 2 kept]\n\n"


class TestSplitPreview:
    @pytest.mark.parametrize(("at", "cut"), [(0, False), (4, False), (5, True), (9, True)])
    def test_head_cut_back_in_second_half_only(self, at: int, cut: bool) -> None:
        """The head of 10 is cut back to a line break at 5..9 of it, not at 0..4."""
        text = "a" * at + "\n" + "a" * 100
        assert split_preview(text, 10, 4)[0] == (text[:at] if cut else text[:10])

    def test_tail_cut_forward_in_first_half_only(self) -> None:
        """The tail of 10 is cut past a line break at 0..4 of it, not at 5."""
        assert split_preview("x" * 100 + "abcd\nefghi", 4, 10)[1] == "efghi"
        assert split_preview("x" * 100 + "abcde\nfghi", 4, 10)[1] == "abcde\nfghi"

    @property_settings(200)
    @given(text=st.text(st.sampled_from(["a", "\n", "é", "🙂", "𝄞"]), min_size=60, max_size=300))
    def test_split_parts_are_prefix_and_suffix(self, text: str) -> None:
        """Head is a prefix and tail a suffix of the text, at most their sizes, and N adds up."""
        head, tail = split_preview(text, 40, 10)
        assert text.startswith(head) and text.endswith(tail)
        assert len(head) <= 40 and len(tail) <= 10
        assert len(head) >= 20 and len(tail) >= 5
        p = preview_form(text, 40, 10, keys=[], path="/p")
        n = int(p[len(head) :].split("[", 1)[1].split(" ", 1)[0].replace(",", ""))
        assert n == len(text) - len(head) - len(tail)
        p.encode("utf-8")
