"""The held-out probes: built from every story and agreement sentence, scored like a direct softmax."""

import pytest
import torch

from lib.capstone import CorpusConfig, model_config, prepare_data
from lib.capstone_probes import PROBES, head_ablations, held_out_probes, probe_scores
from lib.gpt import GPT
from lib.stories import NAMES


@pytest.fixture(scope="module")
def setup():
    data = prepare_data(CorpusConfig(n_paragraphs=600))
    torch.manual_seed(0)
    model = GPT(model_config(data, dict(n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, max_len=256))).eval()
    return data, model, held_out_probes(data.val_text, data.tokenizer)


def test_one_probe_per_story_and_per_agreement_sentence(setup):
    data, _, probes = setup
    paragraphs = [p for p in data.val_text.split("\n\n") if p]
    stories = [p for p in paragraphs if p.startswith("Once upon")]
    sentences = sum(p.count(" that the ") for p in paragraphs if p.startswith("The "))
    assert set(probes) == set(PROBES)
    for name in ("name", "name, same gender", "pronoun", "object"):
        assert len(probes[name].prompts) == len(stories) > 0
    assert len(probes["agreement"].prompts) == sentences > 0
    decode = data.tokenizer.decode
    name = probes["name"]
    for prompt, right, rivals in zip(name.prompts, name.right, name.rivals, strict=True):
        text = decode(list(prompt))
        hero = text.split(" named ")[1].split(".")[0]
        assert text.endswith(" One day") and decode([right]) == f" {hero}"
        assert len(rivals) == len(NAMES) - 1
    gender = dict(NAMES)
    for right, rivals in zip(probes["name, same gender"].right, probes["name, same gender"].rivals, strict=True):
        hero = decode([right]).strip()
        assert sorted(gender[decode([r]).strip()] for r in rivals) == [gender[hero]] * 5
    for prompt, right in zip(probes["agreement"].prompts, probes["agreement"].right, strict=True):
        subject = decode(list(prompt)).split("The ")[-1].split(" that")[0]
        assert decode([right]) == (" are" if subject.endswith("s") else " is")


def test_scores_match_the_models_softmax_prompt_by_prompt(setup):
    _, model, probes = setup
    scores = probe_scores(model, probes)
    for name in ("pronoun", "object"):
        probe = probes[name]
        p_right, beats = [], []
        with torch.no_grad():
            for prompt, right, rivals in zip(probe.prompts, probe.right, probe.rivals, strict=True):
                p = torch.softmax(model(torch.tensor([prompt]))[0, -1], -1)
                p_right.append(p[right].item())
                beats.append(all(p[right] > p[r] for r in rivals))
        assert scores[name]["mean_p"] == pytest.approx(sum(p_right) / len(p_right), rel=1e-4)
        assert scores[name]["share_beats_rivals"] == pytest.approx(sum(beats) / len(beats))
        assert scores[name]["prompts"] == len(probe.prompts)


def test_head_ablations_table_shape_and_sign_convention(setup):
    data, model, probes = setup
    windows = data.val_ids[: 4 * 64].view(4, 64)
    table = head_ablations(model, {"pronoun": probes["pronoun"]}, windows)
    assert table["pronoun"].shape == (2, 4)
    assert torch.isfinite(table["pronoun"]).all()


def test_probes_with_the_same_prompts_and_answers_are_ablated_once_and_alike(setup):
    data, model, probes = setup
    windows = data.val_ids[: 4 * 64].view(4, 64)
    together = head_ablations(model, {p: probes[p] for p in ("name", "name, same gender")}, windows)
    alone = head_ablations(model, {"name, same gender": probes["name, same gender"]}, windows)
    assert torch.equal(together["name"], together["name, same gender"])  # the rivals do not enter
    assert torch.allclose(together["name, same gender"], alone["name, same gender"], atol=1e-6)
    assert together["name"] is not together["name, same gender"]  # the caller may change one alone
