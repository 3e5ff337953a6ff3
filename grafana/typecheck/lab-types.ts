// The types the generated dashboard files (generate.mjs) are checked against:
// @grafana/schema's dashboard types, with each panel's `options` and
// `fieldConfig.defaults.custom` typed by its panel kind's own generated types.
//
// Every type is a plain object type without index signatures where the schema
// has none, so an object literal with an unknown key fails (excess property
// check), as does a wrong enum value or a string where a number belongs.
// Where these types depart from the package's, the comment says why: Json<T>
// (string enums as their values), LabFieldConfigSource (no open `custom`),
// LabTarget (the Prometheus query model is not in the package) and
// LabAnnotation (the one place the package's types are too strict).
import type {
  AnnotationQuery,
  AnnotationTarget,
  Dashboard,
  DataQuery,
  FieldConfig,
  FieldConfigSource,
  Panel,
  RowPanel,
} from '@grafana/schema';
import type * as annotationslist from '@grafana/schema/dist/esm/raw/composable/annotationslist/panelcfg/x/AnnotationsListPanelCfg_types.gen';
import type * as barchart from '@grafana/schema/dist/esm/raw/composable/barchart/panelcfg/x/BarChartPanelCfg_types.gen';
import type * as bargauge from '@grafana/schema/dist/esm/raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen';
import type * as dashboardlist from '@grafana/schema/dist/esm/raw/composable/dashboardlist/panelcfg/x/DashboardListPanelCfg_types.gen';
import type * as gauge from '@grafana/schema/dist/esm/raw/composable/gauge/panelcfg/x/GaugePanelCfg_types.gen';
import type * as heatmap from '@grafana/schema/dist/esm/raw/composable/heatmap/panelcfg/x/HeatmapPanelCfg_types.gen';
import type * as histogram from '@grafana/schema/dist/esm/raw/composable/histogram/panelcfg/x/HistogramPanelCfg_types.gen';
import type * as logs from '@grafana/schema/dist/esm/raw/composable/logs/panelcfg/x/LogsPanelCfg_types.gen';
import type * as piechart from '@grafana/schema/dist/esm/raw/composable/piechart/panelcfg/x/PieChartPanelCfg_types.gen';
import type * as stat from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type * as statetimeline from '@grafana/schema/dist/esm/raw/composable/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen';
import type * as statushistory from '@grafana/schema/dist/esm/raw/composable/statushistory/panelcfg/x/StatusHistoryPanelCfg_types.gen';
import type * as table from '@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen';
import type * as text from '@grafana/schema/dist/esm/raw/composable/text/panelcfg/x/TextPanelCfg_types.gen';
import type * as timeseries from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';
import type * as trend from '@grafana/schema/dist/esm/raw/composable/trend/panelcfg/x/TrendPanelCfg_types.gen';

/**
 * A schema type as JSON can spell it. JSON cannot name a TypeScript enum, and a
 * string literal is not assignable to a string enum, so every string enum
 * becomes the union of its values (`${LegendDisplayMode}` is
 * "list" | "table" | "hidden"). Numeric enums (graphTooltip, hide) stay: a
 * number literal that is one of their values is assignable, any other is not.
 * Everything else is kept as is, recursively.
 */
export type Json<T> = T extends string
  ? `${T}`
  : T extends number | boolean | bigint | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Json<U>>
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

/**
 * A panel's fieldConfig with `defaults.custom` typed by the panel kind. The
 * schema's generic veneer adds `& Record<string, unknown>` to `custom`, which
 * would let any key through; the kind's FieldConfig alone is used instead.
 * Kinds whose package exports no FieldConfig (stat, gauge, ...) keep the
 * schema's untyped `custom`.
 */
export type LabFieldConfigSource<TCustom> = Omit<FieldConfigSource, 'defaults'> & {
  defaults: Omit<FieldConfig, 'custom'> & { custom?: TCustom };
};

/**
 * A query of a panel. The schema has the common DataQuery fields only
 * (refId, datasource, hide, queryType): the Prometheus query model (expr,
 * legendFormat, ...) is not in @grafana/schema, so its other keys are open.
 */
export type LabTarget = Json<DataQuery> & Record<string, unknown>;

/** A panel of kind K with that kind's options and custom field config. */
export type KindPanel<K extends string, TOptions, TCustom = Record<string, unknown>> = Json<
  Omit<Panel, 'type' | 'options' | 'fieldConfig' | 'targets'>
> & {
  type: K;
  options?: Json<TOptions>;
  fieldConfig?: Json<LabFieldConfigSource<TCustom>>;
  targets?: LabTarget[];
};

/**
 * The panel kinds, by `type` (Grafana's plugin id). The lab's dashboards use
 * timeseries; the others are core panels whose types the package exports. A
 * panel of a type missing here fails the check (PanelOf's constraint): add the
 * kind with its types from @grafana/schema/dist/types/raw/composable/<kind>.
 */
export interface PanelKinds {
  annolist: KindPanel<'annolist', annotationslist.Options>;
  barchart: KindPanel<'barchart', barchart.Options, barchart.FieldConfig>;
  bargauge: KindPanel<'bargauge', bargauge.Options>;
  dashlist: KindPanel<'dashlist', dashboardlist.Options>;
  gauge: KindPanel<'gauge', gauge.Options>;
  heatmap: KindPanel<'heatmap', heatmap.Options, heatmap.FieldConfig>;
  histogram: KindPanel<'histogram', histogram.Options, histogram.FieldConfig>;
  logs: KindPanel<'logs', logs.Options>;
  piechart: KindPanel<'piechart', piechart.Options, piechart.FieldConfig>;
  stat: KindPanel<'stat', stat.Options>;
  'state-timeline': KindPanel<'state-timeline', statetimeline.Options, statetimeline.FieldConfig>;
  'status-history': KindPanel<'status-history', statushistory.Options, statushistory.FieldConfig>;
  table: KindPanel<'table', table.Options, table.FieldConfig>;
  text: KindPanel<'text', text.Options>;
  timeseries: KindPanel<'timeseries', timeseries.Options, timeseries.FieldConfig>;
  trend: KindPanel<'trend', trend.Options, trend.FieldConfig>;
}

export type PanelOf<K extends keyof PanelKinds> = PanelKinds[K];
export type AnyPanel = PanelKinds[keyof PanelKinds];

/** A row: the schema's RowPanel, its nested panels typed by kind. */
export type LabRow = Json<Omit<RowPanel, 'panels'>> & { panels: AnyPanel[] };

/**
 * An annotation query. The one exception to the package's types: its veneer
 * types `target` as a DataQuery (refId required), but Grafana's built-in
 * "-- Grafana --" annotation source stores its tag filter as the dashboard
 * schema's own AnnotationTarget ({type, tags, matchAny, limit}, no refId), as
 * Grafana itself saves it. Either shape is accepted, with no open keys: an
 * unknown key is still an error.
 */
export type LabAnnotation = Json<Omit<AnnotationQuery, 'target'>> & {
  target?: Json<AnnotationTarget> | Json<DataQuery>;
};

export type LabDashboard = Json<Omit<Dashboard, 'panels' | 'annotations'>> & {
  panels?: Array<AnyPanel | LabRow>;
  annotations?: { list?: LabAnnotation[] };
};
