"""BERT (DeBERTa-v2) to ONNX: float32, and int8 / int4 weight quantizations.

The exported graph takes ``input_ids`` and ``attention_mask`` (int64
``[batch, seq]``) and returns ``hidden_states`` ``[batch, seq, hidden]`` =
the third-from-last hidden state SBV2 reads (the model is cut after that layer).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from yomiage.bert.torch_bert import TorchBert
from yomiage.runtime.engines.telemetry import engines_without_telemetry

OPSET = 18
MAX_TOKENS = 512  # DeBERTa-v2's position range


class _BertGraph(nn.Module):
    def __init__(self, bert: TorchBert) -> None:
        super().__init__()
        self.model = bert.model

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def export_bert(bert: TorchBert, path: Path) -> Path:
    """Write the float32 ONNX graph of ``bert`` to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ids, mask = bert.tokenizer.encode_batch(["今日はいい天気ですね。", "はい。"])
    # The TorchScript exporter freezes DeBERTa's relative-position tables at the
    # sample length (features off by 3.6 at other lengths); torch.export keeps
    # the sequence length symbolic.
    batch = torch.export.Dim("batch")
    seq = torch.export.Dim("seq", min=2, max=MAX_TOKENS)
    # torch.onnx's exporter imports ONNX Runtime itself: started without telemetry.
    with torch.inference_mode(), engines_without_telemetry():
        torch.onnx.export(
            _BertGraph(bert).eval(),
            (torch.from_numpy(ids), torch.from_numpy(mask)),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["hidden_states"],
            dynamic_shapes={
                "input_ids": {0: batch, 1: seq},
                "attention_mask": {0: batch, 1: seq},
            },
            opset_version=OPSET,
            dynamo=True,
            external_data=False,
            verbose=False,
        )
    return path


def quantize_q8(source: Path, target: Path) -> Path:
    """Dynamic int8 quantization of the MatMul/Gemm weights (activations stay float)."""
    with engines_without_telemetry():  # ONNX Runtime decides at its start
        from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(source),
        str(target),
        op_types_to_quantize=["MatMul", "Gemm"],
        weight_type=QuantType.QInt8,
    )
    return target


def quantize_q4(source: Path, target: Path, block_size: int = 32) -> Path:
    """Weight-only 4-bit (blockwise) quantization of the MatMul weights."""
    import onnx

    with engines_without_telemetry():  # ONNX Runtime decides at its start
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    model = onnx.load(str(source))
    quantizer = MatMulNBitsQuantizer(model, block_size=block_size, is_symmetric=True)
    quantizer.process()
    onnx.save_model(quantizer.model.model, str(target))
    return target
