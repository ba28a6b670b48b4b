"""Stock architectures as users bring them, from small configs: the builders
of the model-zoo end-to-end tests (test_zoo_text.py, test_zoo_vision.py).

Each builder returns (module in eval mode, data): the module's forward takes
the data's tensors in order and returns the model's own loss, as a user
would write it for training (Hugging Face models with their labels,
torchvision classifiers with cross-entropy); data maps each input name to
[models.STEPS, ...] arrays. Nothing is downloaded: configs are small
(2 layers, width 64, vocab 64), dropout 0, and every parameter gets a
little noise so the harness can pair ONNX initializers with parameters by
value (Hugging Face starts norms at 1 and biases at 0).

Exports follow models.export_training: training mode, no constant folding,
dynamic batch (and sequence) axes, opset 17.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import models  # noqa: E402

VOCAB, SEQ, BATCH = 64, 16, 2
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=128)


def transformers():
    torch.manual_seed(0)  # every builder constructs its model from here
    try:
        import transformers as t
    except ImportError as e:  # the venv is made by `make test`
        raise ImportError("transformers is missing: run this under the test "
                          "virtualenv (scripts/setup-test-venv.sh build/test-venv)") from e
    return t


class LanguageModelLoss(nn.Module):
    """forward(idx, labels) -> the model's loss (causal models shift the
    labels themselves, masked and seq2seq models compare position by
    position)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, labels):
        return self.model(input_ids=idx, labels=labels).loss


class SpeechLoss(nn.Module):
    """Whisper: forward(features, labels) -> loss; the decoder's inputs are
    the labels shifted right, as Hugging Face builds them."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, features, labels):
        return self.model(input_features=features, labels=labels).loss


class ContrastiveLoss(nn.Module):
    """CLIP: forward(idx, pixels) -> its symmetric contrastive loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, pixels):
        return self.model(input_ids=idx, pixel_values=pixels, return_loss=True).loss


class Classifier(nn.Module):
    """forward(x, targets) -> cross-entropy of the network's logits; `hf`
    for Hugging Face image models (pixel_values in, .logits out)."""

    def __init__(self, net, hf=False):
        super().__init__()
        self.net = net
        self.hf = hf

    def forward(self, x, targets):
        logits = self.net(pixel_values=x).logits if self.hf else self.net(x)
        return F.cross_entropy(logits, targets)


def distinct(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))
    return model


def tokens(seed, low=0, steps=models.STEPS):
    """Token ids in [low, VOCAB): `low` keeps clear of a model's special ids
    (padding rows get no gradient in PyTorch's embeddings, which an export's
    Gather cannot say)."""
    rng = np.random.default_rng(seed)
    return rng.integers(low, VOCAB, size=(steps, BATCH, SEQ)).astype(np.int64)


def images(seed, size=32, classes=10, steps=models.STEPS, batch=BATCH):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((steps, batch, 3, size, size)).astype(np.float32),
            "targets": rng.integers(0, classes, (steps, batch)).astype(np.int64)}


def language_model(model, seed, low=0):
    ids = tokens(seed, low)
    return distinct(LanguageModelLoss(model), seed).eval(), {"idx": ids, "labels": ids.copy()}


def llama():
    t = transformers()
    # Token 0 is Llama's padding id: nn.Embedding(padding_idx=0) gives its row
    # no gradient, which an export's Gather cannot say.
    return language_model(t.LlamaForCausalLM(t.LlamaConfig(
        vocab_size=VOCAB, max_position_embeddings=64, **SMALL)), 11, low=1)


def opt():
    t = transformers()
    # OPT's padding id is 1 and its positions count from the attention mask.
    return language_model(t.OPTForCausalLM(t.OPTConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, ffn_dim=128,
        num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=64,
        dropout=0.0, attention_dropout=0.0)), 12, low=3)


def gpt_neox():
    t = transformers()
    return language_model(t.GPTNeoXForCausalLM(t.GPTNeoXConfig(
        vocab_size=VOCAB, max_position_embeddings=64, **SMALL)), 13)


def bloom():
    t = transformers()
    return language_model(t.BloomForCausalLM(t.BloomConfig(
        vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4, hidden_dropout=0.0,
        attention_dropout=0.0)), 14, low=4)


def gptj():
    t = transformers()
    return language_model(t.GPTJForCausalLM(t.GPTJConfig(
        vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
        n_inner=128, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)), 23)


def t5():
    t = transformers()
    # Labels never hold the pad id 0: shift_tokens_right starts the decoder
    # from it, and the loss ignores nothing.
    return language_model(t.T5ForConditionalGeneration(t.T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)), 15, low=1)


def roberta():
    t = transformers()
    # Positions count from padding_idx + 1 = 2 over non-padding tokens.
    return language_model(t.RobertaForMaskedLM(t.RobertaConfig(
        vocab_size=VOCAB, max_position_embeddings=SEQ + 2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, **SMALL)), 16, low=3)


def distilbert():
    t = transformers()
    return language_model(t.DistilBertForMaskedLM(t.DistilBertConfig(
        vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=128, dropout=0.0,
        attention_dropout=0.0, max_position_embeddings=SEQ)), 17, low=1)


def whisper():
    t = transformers()
    model = t.WhisperForConditionalGeneration(t.WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=8, d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
        decoder_ffn_dim=128, max_source_positions=16, max_target_positions=32,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        dropout=0.0))
    rng = np.random.default_rng(18)
    # 2 * max_source_positions frames: the conv front end halves them.
    features = rng.standard_normal((models.STEPS, BATCH, 8, 32)).astype(np.float32)
    return distinct(SpeechLoss(model), 18).eval(), {"features": features,
                                                    "labels": tokens(19, low=3)}


def vit():
    t = transformers()
    model = t.ViTForImageClassification(t.ViTConfig(
        image_size=32, patch_size=8, num_labels=10, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, **SMALL))
    return distinct(Classifier(model, hf=True), 20).eval(), images(20)


def clip():
    t = transformers()
    config = t.CLIPConfig(
        text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4,
                         max_position_embeddings=SEQ),
        vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, image_size=32, patch_size=8),
        projection_dim=32)
    rng = np.random.default_rng(21)
    pixels = rng.standard_normal((models.STEPS, BATCH, 3, 32, 32)).astype(np.float32)
    return distinct(ContrastiveLoss(t.CLIPModel(config)), 21).eval(), {
        "idx": tokens(22, low=1), "pixels": pixels}


TEXT = {"llama": llama, "opt": opt, "gpt_neox": gpt_neox, "bloom": bloom, "gptj": gptj, "t5": t5,
        "roberta": roberta, "distilbert": distilbert, "whisper": whisper, "vit": vit,
        "clip": clip}


def no_stochastic_depth(net):
    """Dropout and stochastic depth off (p = 0), so that a step is
    deterministic and comparable with PyTorch's."""
    import torchvision
    for m in net.modules():
        if isinstance(m, (nn.Dropout, torchvision.ops.StochasticDepth)):
            m.p = 0.0
    return net


def torchvision_model(name, size=32):
    import torchvision.models as tvm
    builders = {
        "resnet50": lambda: tvm.resnet50(num_classes=10),
        "efficientnet": lambda: tvm.efficientnet_b0(num_classes=10),
        "convnext": lambda: tvm.convnext_tiny(num_classes=10),
        "swin": lambda: tvm.swin_t(num_classes=10),
        "densenet": lambda: tvm.densenet121(num_classes=10),
        "shufflenet": lambda: tvm.shufflenet_v2_x0_5(num_classes=10),
        "regnet": lambda: tvm.regnet_y_400mf(num_classes=10),
        "mnasnet": lambda: tvm.mnasnet0_5(num_classes=10),
        "mobilenet_v3": lambda: tvm.mobilenet_v3_small(num_classes=10),
    }
    torch.manual_seed(0)
    return Classifier(no_stochastic_depth(builders[name]())).eval()


VISION = ("resnet50", "efficientnet", "convnext", "swin", "densenet", "shufflenet",
          "regnet", "mnasnet", "mobilenet_v3")
