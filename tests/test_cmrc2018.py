"""The CMRC 2018 metric on worked examples, each computed by hand from the official rules."""

import pytest

from albert_tf.metrics import cmrc2018


def test_mixed_segmentation_splits_chinese_characters_and_nltk_words():
  # Lowercased and stripped; each Chinese character is a segment, runs between are NLTK words.
  assert cmrc2018.mixed_segmentation(" iPhone 6s于2015年发布 ") == [
      "iphone", "6s", "于", "2015", "年", "发", "布"]
  assert cmrc2018.mixed_segmentation("增长12.5%") == ["增", "长", "12.5", "%"]
  # Listed punctuation is a segment of its own, unless removed.
  assert cmrc2018.mixed_segmentation("《红楼梦》：曹雪芹") == [
      "《", "红", "楼", "梦", "》", "：", "曹", "雪", "芹"]
  assert cmrc2018.mixed_segmentation("《红楼梦》：曹雪芹", remove_punctuation=True) == [
      "红", "楼", "梦", "曹", "雪", "芹"]


def test_removed_punctuation_joins_the_runs_around_it():
  # The official script drops the mark before looking for a run's end: "a-b" is one word.
  assert cmrc2018.mixed_segmentation("a-b") == ["a", "-", "b"]
  assert cmrc2018.mixed_segmentation("a-b", remove_punctuation=True) == ["ab"]
  assert cmrc2018.f1_score(["a-b"], "a b") == 0.0  # "ab" against "a", "b"
  assert cmrc2018.exact_match(["a-b"], "AB") == 1.0


def test_f1_is_the_longest_common_substring_f1():
  # Gold: iphone 6s 于 2015 年 发 布 (7); predicted: 2015 年 发 布 (4): P 1, R 4/7.
  assert cmrc2018.f1_score(["iPhone 6s于2015年发布"], "2015年发布") == pytest.approx(8 / 11)
  # A substring, not a subsequence: 甲乙丙丁 vs 甲丙丁 share 丙丁 (2): P 2/3, R 2/4 -> 4/7.
  assert cmrc2018.f1_score(["甲乙丙丁"], "甲丙丁") == pytest.approx(4 / 7)
  # Mixed digits: 增 长 12.5 % vs 12.5: P 1, R 1/4 -> 0.4.
  assert cmrc2018.f1_score(["增长12.5%"], "12.5") == pytest.approx(0.4)
  assert cmrc2018.f1_score(["北京"], "上海") == 0.0
  assert cmrc2018.f1_score(["北京"], "") == 0.0


def test_several_golds_score_the_best_one():
  # 北京市政府 (5) vs 北京 (2): 4/7; vs 北京市 (3): P 3/5, R 1 -> 3/4.
  assert cmrc2018.f1_score(["北京", "北京市"], "北京市政府") == pytest.approx(3 / 4)
  assert cmrc2018.exact_match(["北京", "北京市"], "北京市") == 1.0
  assert cmrc2018.exact_match(["北京", "北京市"], "北京市政府") == 0.0


def test_exact_match_ignores_case_outer_space_and_listed_punctuation_only():
  assert cmrc2018.exact_match(["《红楼梦》"], "红楼梦") == 1.0
  assert cmrc2018.exact_match(["NBA"], " nba ") == 1.0
  assert cmrc2018.exact_match(["1990年"], "1990 年") == 0.0  # inner space counts
  # "……" is listed as one two-character mark and the script compares single characters:
  # an ellipsis is never removed (kept as in the official evaluator).
  assert cmrc2018.exact_match(["等等……"], "等等") == 0.0
  assert cmrc2018.exact_match(["‘甲’"], "甲") == 0.0  # "’" is listed, "‘" is not


def test_evaluate_averages_over_all_questions_and_unanswered_score_zero():
  dataset = [{"paragraphs": [{"context": "", "qas": [
      {"id": "a", "answers": [{"text": "《红楼梦》"}]},  # EM 1, F1 1
      {"id": "b", "answers": [{"text": "甲乙丙丁"}, {"text": "乙丙"}]},  # EM 0, F1 6/7
      {"id": "c", "answers": [{"text": "北京"}]},  # no prediction: 0, 0
  ]}]}]
  # b: 甲乙丙 vs 甲乙丙丁: P 1, R 3/4 -> 6/7; vs 乙丙: P 2/3, R 1 -> 4/5; best 6/7.
  result = cmrc2018.evaluate(dataset, {"a": "红楼梦", "b": "甲乙丙"})
  assert result["EM"] == pytest.approx(100 / 3)
  assert result["F1"] == pytest.approx(100 * (1 + 6 / 7) / 3)
  assert result["AVERAGE"] == pytest.approx((result["EM"] + result["F1"]) / 2)
  assert result["TOTAL"] == 3 and result["SKIP"] == 1


def test_chinese_contexts_are_told_from_english_ones():
  assert cmrc2018.is_mostly_cjk(["《泡泡战士》由韩国Nexon开发，2V2模式。", "臺灣的總統府"])
  assert not cmrc2018.is_mostly_cjk(["The Nexon game 泡泡战士 was released in 2008."])
  assert not cmrc2018.is_mostly_cjk([])


def test_segment_characters_are_u4e00_to_u9fa5_inclusive():
  assert cmrc2018.mixed_segmentation("一x\u9fa5y") == ["一", "x", "\u9fa5", "y"]
  assert cmrc2018.mixed_segmentation("x\u9fa6") == ["x\u9fa6"]  # past the official range


def test_remove_punctuation_lowercases_strips_and_drops_listed_marks_only():
  assert cmrc2018.remove_punctuation(" 《NBA》：Finals ") == "nbafinals"
  assert cmrc2018.remove_punctuation("a b.") == "a b."  # "." is not listed


def test_a_predictions_punctuation_is_removed_before_f1_too():
  assert cmrc2018.f1_score(["ab"], "a-b") == 1.0


def test_the_longest_common_substring_may_end_at_either_lists_last_item():
  assert cmrc2018.longest_common_substring(["b"], ["a", "b"]) == 1
  assert cmrc2018.longest_common_substring(["a", "b", "c"], ["x", "b", "c"]) == 2
  assert cmrc2018.longest_common_substring([], ["a"]) == 0


def test_scores_are_percentages_of_all_questions_and_skipped_ones_are_counted():
  def dataset(*ids):
    return [{"paragraphs": [{"context": "", "qas": [
        {"id": i, "answers": [{"text": "北京"}]} for i in ids]}]}]
  one = cmrc2018.evaluate(dataset("a"), {"a": "北京"})
  assert (one["EM"], one["F1"], one["TOTAL"], one["SKIP"]) == (100.0, 100.0, 1, 0)
  # Two questions without a prediction, then two answered (one right): 1 of 4.
  four = cmrc2018.evaluate(dataset("a", "b", "c", "d"), {"c": "北京", "d": "上海"})
  assert (four["EM"], four["F1"], four["TOTAL"], four["SKIP"]) == (25.0, 25.0, 4, 2)
  two_right = cmrc2018.evaluate(dataset("a", "b", "c", "d"), {"c": "北京", "d": "北京"})
  assert two_right["EM"] == two_right["F1"] == 50.0


def test_question_ids_used_twice_are_refused_naming_the_first_ten():
  def dataset(ids):
    return [{"paragraphs": [{"context": "", "qas": [{"id": i, "answers": []}
                                                     for i in ids + ids]}]}]
  ten = [f"q{n}" for n in range(10)]
  with pytest.raises(ValueError) as refused:
    cmrc2018.evaluate(dataset(ten), {})
  assert str(refused.value) == (f"question id(s) used more than once: {', '.join(ten)}; "
                                "predictions keyed by id cannot score them")
  with pytest.raises(ValueError) as refused:
    cmrc2018.evaluate(dataset(ten + ["q10"]), {})
  assert str(refused.value).startswith(f"question id(s) used more than once: {', '.join(ten)} "
                                       "...; predictions")


def test_mostly_cjk_counts_both_ideograph_blocks_to_their_ends_and_no_spaces():
  # U+4E00..U+9FFF and Extension A U+3400..U+4DBF, each end included: 4 against 3.
  assert cmrc2018.is_mostly_cjk(["\u4e00\u9fff\u3400\u4dbfabc"])
  assert not cmrc2018.is_mostly_cjk(["中中abc"])
  assert cmrc2018.is_mostly_cjk(["中 \t\n "])
