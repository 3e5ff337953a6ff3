"""What every record shares: its JSON field names kept as they are written
(unknown fields of older or newer records kept too), and its JSON form."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

# Each figure as the JSON holds it: an int stays an int where a float type would
# make 1.0 of 1, so that a record read and written again is the same file and its
# figures show as they were written.
Figure = int | float


class Record(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def as_json(self) -> dict[str, Any]:
        """The record as results/*.json holds it: the JSON field names, `schema` among them."""
        return self.model_dump(mode="json", by_alias=True)


class Strict(BaseModel):
    """Published data as it loads (data/*.toml): a key no field names is an error."""

    model_config = ConfigDict(extra="forbid")


class AsRead(Record):
    """A part of a record written back with the keys it was read (or made) with, in
    their order, and no others: an older part lacks keys a newer one has, and a record
    read and written again must be the same file (a default written out would be a
    key its command never wrote)."""

    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        part = handler(data)
        if isinstance(data, dict):
            part._order = list(data)
        return part

    @model_serializer(mode="wrap")
    def _as_read(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped = {k: v for k, v in handler(self).items() if k in self.model_fields_set}
        return {k: dumped[k] for k in self._order if k in dumped} | dumped
